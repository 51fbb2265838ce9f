import ArgumentParser
import VolleyCore

/// The `volley` command line. Each subcommand group lives in its own file.
@main
struct Volley: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "volley",
        abstract: "Push-notification fan-out engine: Redis Streams in, APNs/FCM over HTTP/2 out.",
        version: VolleyVersion.current,
        subcommands: [
            Demo.self, Worker.self, Send.self, Devices.self, Directory.self, Quota.self, Inbox.self, Types.self,
            Templates.self, Segments.self, Schedules.self,
            TestPush.self, Status.self, Events.self, Deliveries.self, API.self, Keys.self, Jobs.self,
        ]
    )
}
