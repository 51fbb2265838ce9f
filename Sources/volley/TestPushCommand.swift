import ArgumentParser
import Foundation
import Logging
import VolleyCore
import VolleyService

struct TestPush: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test-push",
        abstract: "Send one notification and print what the provider answered.",
        discussion: """
            Prints the provider's status, reason, apns-id / message name, and what Volley does about it:
            accepted, remove-token, retry, fix-app or invalid-notification. Exit status 0 only when accepted.
            """)

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "App name (apps[].name).") var app: String
    @Option(help: "ios or android.") var platform: String
    @Option(help: "Device token (APNs hex token or FCM registration token).") var token: String
    @Flag(help: "Validate without delivering (FCM validate_only; APNs: build and sign only).") var dryRun = false
    @Option(help: "The whole notification as JSON (camelCase keys).") var notification: String?
    @Option(help: "Alert title.") var title: String?
    @Option(help: "Alert body.") var body: String?
    @Option(help: "Sound name.") var sound: String?
    @Option(help: "Badge number.") var badge: Int?
    @Flag(help: "Silent (content-available) push.") var silent = false
    @Option(help: "Custom data as a JSON object.") var data: String?
    @Option(help: "Device locale used to pick a localized variant.") var locale: String?
    @Option(help: "APNs environment of the token (production or sandbox); default: the app's.") var environment: String?
    @Flag(help: "Print one JSON object with keys status, reason, outcome.") var json = false

    func run() async throws {
        guard let platform = Platform(rawValue: platform) else {
            throw ValidationError("--platform must be ios or android")
        }
        let env: APNSEnvironment?
        switch environment {
        case nil: env = nil
        case "production": env = .production
        case "sandbox": env = .sandbox
        default: throw ValidationError("--environment must be production or sandbox")
        }
        let n = try buildNotification()
        let apps: [ProviderApp]
        do { apps = ProviderApps.from(try VolleyConfiguration.load(path: config)) } catch {
            throw ValidationError("\(error)")
        }
        var logger = Logger(label: "volley.test-push")
        logger.logLevel = .warning
        let result = await VolleyService.TestPush.run(
            .init(
                app: app, platform: platform, token: token, notification: n, dryRun: dryRun, locale: locale,
                environment: env),
            apps: apps, logger: logger, makeTransport: ProviderTransport.pools(logger: logger))
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(result), as: UTF8.self))
        } else {
            print(result.text)
        }
        // Written before exit's own cleanup runs, whatever happens in it.
        fflush(nil)
        if !result.accepted { throw ExitCode(1) }
    }

    private func buildNotification() throws -> VolleyCore.Notification {
        if let notification {
            guard notification.isEmpty == false else { throw ValidationError("--notification is empty") }
            // Read as the worker reads a job, so a number in `data` or a raw payload keeps its text.
            do { return try VolleyCore.Notification(json: try JSONValue(parsing: notification), at: []) } catch {
                throw ValidationError("--notification must be valid JSON with camelCase keys: \(error)")
            }
        }
        var customData: [String: JSONValue]?
        if let data {
            guard case .object(let members)? = try? JSONValue(parsing: data) else {
                throw ValidationError("--data must be a JSON object")
            }
            customData = members
        }
        if silent {
            if title != nil || body != nil || sound != nil || badge != nil {
                throw ValidationError(
                    "--silent sends content-available only: drop --title, --body, --sound and --badge")
            }
            return VolleyCore.Notification(data: customData, contentAvailable: true)
        }
        guard title != nil || body != nil || sound != nil || badge != nil else {
            throw ValidationError("give --notification JSON, or --title/--body (--sound, --badge), or --silent")
        }
        return VolleyCore.Notification(title: title, body: body, sound: sound, badge: badge, data: customData)
    }
}
