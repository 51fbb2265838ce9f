import ArgumentParser
import Foundation
import VolleyCore
import VolleyService

struct Quota: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Hourly push quotas per org and platform (UTC clock hours; only deliverable pushes count).",
        subcommands: [QuotaSet.self, QuotaShow.self])
}

struct QuotaSet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Override an org's hourly limits in Redis (wins over the config file).")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "iOS pushes per hour.") var ios: Int?
    @Option(help: "Android pushes per hour.") var android: Int?
    @Flag(help: "Remove the Redis overrides (back to the config file's limits).") var reset = false

    func validate() throws {
        if !reset && ios == nil && android == nil { throw ValidationError("give --ios N, --android N, or --reset") }
        if let ios, ios < 0 { throw ValidationError("--ios must be ≥ 0") }
        if let android, android < 0 { throw ValidationError("--android must be ≥ 0") }
    }

    func run() throws {
        let services = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        if reset { try services.quota.clearLimits(org: OrgID(org)) }
        try services.quota.setLimits(org: OrgID(org), ios: ios, android: android)
        for u in try services.quota.usage(org: OrgID(org)) { print("\(u.platform): limit \(u.limit)/hour") }
    }
}

struct QuotaShow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Limits, used and remaining this UTC hour.")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        let services = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        let usage = try services.quota.usage(org: OrgID(org))
        if json {
            var obj: [String: Any] = ["org": org, "hour": usage.first?.hour ?? ""]
            for u in usage {
                obj[u.platform.rawValue] = [
                    "limit": u.limit, "used": u.used, "pending": u.pending, "remaining": u.remaining,
                ]
            }
            print(
                String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys]), as: UTF8.self)
            )
            return
        }
        print("org \(org), hour \(usage.first?.hour ?? "") UTC")
        for u in usage {
            print(
                "  \(u.platform.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) limit \(u.limit)  used "
                    + "\(u.used)  remaining \(u.remaining)\(u.pending > 0 ? "  (in flight \(u.pending))" : "")"
            )
        }
    }
}
