import ArgumentParser

struct Worker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run a worker: consume jobs from the Redis stream and send them.")
}
struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Enqueue a job.")
}
struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Manage the device registry.")
}
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run Volley end to end on local defaults (own Redis, bundled mock).")
}
