import Foundation
import Testing
import VolleyTestSupport
import VolleyTestTags

@testable import VolleyService

/// Every configuration key the docs name can be set from the environment, as README's "Configuration" says, and the
/// variable takes effect. The docs are the list walked: README's and docs/api.md's YAML examples and the keys of
/// docs/tuning.md's tables; a documented key without a variable fails here, so a new key must get one (or be one
/// of the lists and per-org maps the docs call file-only).
@Suite(.tags(.unit)) struct ConfigurationKeysTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Lists of mappings and maps keyed by org or app: set in the file only (README, "Configuration").
    static let fileOnly = ["apps", "apps[].name", "apps[].orgs", "orgs[]", "quotas.orgs", "api.userTokens.keys"]

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The leaf keys of the ```yaml blocks of `markdown`, as dotted paths (`apps[].apns.keyId`, `api.tls.certFile`).
    static func yamlKeys(_ markdown: String) -> Set<String> {
        var paths: [String] = []
        var inYAML = false
        var stack: [(indent: Int, key: String)] = []
        let keyLine = /^( *)(- )?([A-Za-z][A-Za-z0-9_]*):/
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                inYAML = line == "```yaml"
                stack = []
                continue
            }
            guard inYAML, let m = line.firstMatch(of: keyLine) else { continue }
            let indent = m.1.count + (m.2 == nil ? 0 : 2)
            while let last = stack.last, last.indent >= indent { stack.removeLast() }
            if m.2 != nil, var parent = stack.popLast() {
                if !parent.key.hasSuffix("[]") { parent.key += "[]" }
                stack.append(parent)
            }
            stack.append((indent, String(m.3)))
            paths.append(stack.map(\.key).joined(separator: "."))
        }
        return Set(paths.filter { p in !paths.contains { $0.hasPrefix(p + ".") } })
    }

    /// The keys in the first column of docs/tuning.md's tables: dotted ones as written, the worker table's bare ones
    /// under `worker.`.
    static func tuningKeys(_ markdown: String) -> Set<String> {
        var out = Set<String>()
        var section = ""
        for line in markdown.split(separator: "\n") {
            if line.hasPrefix("### ") { section = String(line) }
            guard line.hasPrefix("| `") else { continue }
            let cell = line.dropFirst(2).prefix { $0 != "|" }
            for m in cell.matches(of: /`([A-Za-z][A-Za-z0-9_.\[\]{},]*)`/) {
                let key = String(m.1)
                if key.contains(".") {
                    out.insert(key)
                } else if section.contains("`worker.*`") {
                    out.insert("worker." + key)
                }
            }
        }
        return out
    }

    static func documentedKeys() throws -> Set<String> {
        try yamlKeys(text("README.md")).union(yamlKeys(text("docs/api.md"))).union(tuningKeys(text("docs/tuning.md")))
    }

    @Test func theDocsAreReadAsAListOfKeys() throws {
        let keys = try Self.documentedKeys()
        for expected in [
            "worker.inFlight", "redis.url", "apps[].apns.keyId", "api.maxConnections", "api.headerTimeoutSeconds",
            "api.idleTimeoutSeconds", "api.readinessTimeoutSeconds", "api.tls.certFile", "metrics.apiPort",
        ] {
            #expect(keys.contains(expected), "\(expected) not found in the docs")
        }
        #expect(keys.count > 60, "\(keys.sorted())")
    }

    @Test func everyDocumentedKeyHasAnEnvironmentVariable() throws {
        let names = EnvironmentOverrides.names(schema: VolleyConfiguration.schema)
        for key in try Self.documentedKeys().sorted() {
            if Self.fileOnly.contains(where: { key == $0 || key.hasPrefix($0 + ".") || key.hasPrefix($0 + "[]") }) {
                continue
            }
            if key.hasPrefix("apps[].") {
                let parts = key.split(separator: ".").map(String.init)
                let known = parts.count == 3 && VolleyConfiguration.appSchema[parts[1]]?.contains(parts[2]) == true
                #expect(known, "\(key) is documented and has no VOLLEY_APPS_<NAME>_… variable")
                continue
            }
            let name = EnvironmentOverrides.envName(key.split(separator: ".").map(String.init))
            #expect(names.contains(name), "\(key) is documented and \(name) is not read")
        }
    }

    /// Each variable the loader reads changes what it loads: a test value per key, none of them its default.
    @Test func everyVariableTakesEffect() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("volley-env-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let pem = dir.appendingPathComponent("api.pem").path
        try "x".write(toFile: pem, atomically: true, encoding: .utf8)
        // `redis.tls` files are loaded at startup: a real CA and client certificate.
        let tls = try RedisTestTLS(directory: dir.appendingPathComponent("tls").path)
        let values: [String: String] = [
            "redis.url": "redis://10.0.0.9:6380/1", "redis.connectTimeoutSeconds": "7",
            "redis.commandTimeoutSeconds": "9", "redis.cluster": "10.0.0.1:7000, 10.0.0.2:7000",
            "redis.waitReplicas": "1",
            "worker.stream": "s", "worker.group": "g", "worker.consumer": "c", "worker.deadLetterStream": "d",
            "worker.reportStream": "r", "worker.batchSize": "7", "worker.blockMs": "77", "worker.inFlight": "77",
            "worker.reclaimIdleMs": "70000", "worker.maxDeliveries": "7", "worker.drainSeconds": "7",
            "worker.recordBatchSize": "77", "worker.shardSize": "7777", "worker.concurrentJobs": "3",
            "worker.reclaimIntervalMs": "7000", "worker.keepAliveIntervalMs": "7000", "worker.chunkSize": "77",
            "worker.cpuWakeLatencyUs": "7", "worker.streamShards": "3", "worker.providerOutageSeconds": "7",
            "worker.unansweredSends": "fail", "worker.deviceKeyCacheSize": "777",
            "quotas.ios": "7", "quotas.android": "7", "inbox.maxCount": "7", "inbox.maxAgeSeconds": "77",
            "devices.staleAfterDays": "7", "events.enabled": "false", "events.outcomes": "true",
            "events.maxLength": "7777", "events.maxAgeSeconds": "7777", "deliveries.days": "3",
            "console.enabled": "true", "console.sessionHours": "2",
            "syncHints.minIntervalSeconds": "7", "syncHints.maxPerHour": "7", "syncHints.maxRecordIds": "7",
            "schedule.maxAheadDays": "7", "log.level": "debug", "log.format": "json", "metrics.enabled": "false",
            "metrics.host": "10.0.0.7", "metrics.port": "9999", "metrics.apiPort": "9998",
            "api.host": "10.1.2.3", "api.port": "8181", "api.maxBodyBytes": "4096", "api.drainSeconds": "7.5",
            "api.redisConnections": "3", "api.keyCacheSeconds": "9", "api.headerTimeoutSeconds": "3.5",
            "api.idleTimeoutSeconds": "11", "api.maxConnections": "123", "api.readinessTimeoutSeconds": "4",
            "api.tasksOnEventLoops": "false", "api.rateLimit.requestsPerSecond": "7", "api.rateLimit.burst": "7",
            "api.userTokens.maxTTLSeconds": "600", "redis.tls.caFile": tls.caFile,
            "redis.tls.serverName": "redis.internal", "redis.tls.certFile": tls.clientCertificateFile,
        ]
        // Set together: a certificate without its key stops startup by design, and `redis.tls` needs rediss://.
        let rediss = "rediss://10.0.0.9:6380/1"
        let pairs: [String: [String: String]] = [
            "api.tls.certFile": ["api.tls.keyFile": pem], "api.tls.keyFile": [:],
            "redis.tls.caFile": ["redis.url": rediss], "redis.tls.serverName": ["redis.url": rediss],
            "redis.tls.certFile": ["redis.url": rediss, "redis.tls.keyFile": tls.clientKeyFile],
            "redis.tls.keyFile": [:],
        ]
        let defaults = try VolleyConfiguration.parse(yaml: "", baseDirectory: dir)
        // What a `redis.tls` key changes is told from the same configuration without it.
        let overTLS = try VolleyConfiguration.parse(
            yaml: "", baseDirectory: dir, environment: ["VOLLEY_REDIS_URL": rediss])
        for (section, keys) in VolleyConfiguration.schema {
            for key in keys where APISettings.removed[key] == nil || section != "api" {
                let path = "\(section).\(key)"
                if pairs[path] == [:] { continue }
                guard let value = values[path] ?? (pairs[path] != nil ? pem : nil) else {
                    Issue.record("no test value for \(path): add one here")
                    continue
                }
                var env = [EnvironmentOverrides.envName([section] + key.split(separator: ".").map(String.init)): value]
                for (other, v) in pairs[path] ?? [:] {
                    env[EnvironmentOverrides.envName(other.split(separator: ".").map(String.init))] = v
                }
                let parsed = try VolleyConfiguration.parse(yaml: "", baseDirectory: dir, environment: env)
                let before = path.hasPrefix("redis.tls.") ? overTLS : defaults
                #expect(Self.dump(parsed) != Self.dump(before), "\(env) was not applied")
            }
        }
    }

    static func dump(_ c: VolleyConfiguration) -> String {
        var out = ""
        Swift.dump(c, to: &out)
        return out
    }
}
