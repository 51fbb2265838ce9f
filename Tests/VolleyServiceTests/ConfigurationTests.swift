import Foundation
import Testing
import VolleyCore

@testable import VolleyService

private func tempDir() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("volley-config-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

@Test func parsesTheContractKeysAndResolvesRelativePaths() throws {
    let dir = try tempDir()
    defer { try? FileManager.default.removeItem(at: dir) }
    try "k".write(to: dir.appendingPathComponent("AuthKey_ABC123DEFG.p8"), atomically: true, encoding: .utf8)
    try "{}".write(to: dir.appendingPathComponent("service-account.json"), atomically: true, encoding: .utf8)
    let yaml = """
        apps:
          - name: Test_App
            apns:
              keyFile: AuthKey_ABC123DEFG.p8
              keyId: ABC123DEFG
              teamId: DEF123GHIJ
              topic: com.example.app
              environment: sandbox
              host: 127.0.0.1
              port: 8443
            fcm:
              serviceAccountFile: service-account.json
              endpoint: https://127.0.0.1:8443
        redis:
          url: unix:///tmp/r.sock
        worker:
          inFlight: 100
        """
    let c = try VolleyConfiguration.parse(yaml: yaml, baseDirectory: dir)
    let app = try #require(c.app(named: "Test_App"))
    let apns = try #require(app.apns)
    #expect(
        apns.auth
            == .token(
                keyFile: dir.appendingPathComponent("AuthKey_ABC123DEFG.p8").path, keyId: "ABC123DEFG",
                teamId: "DEF123GHIJ"))
    #expect(apns.environment == .sandbox)
    #expect(apns.effectiveHost == "127.0.0.1")
    #expect(apns.effectivePort == 8443)
    #expect(app.fcm?.endpoint == "https://127.0.0.1:8443")
    #expect(c.redis.url == "unix:///tmp/r.sock")
    #expect(c.worker.inFlight == 100)
    #expect(c.worker.stream == "volley:jobs")
}

@Test func productionIsTheDefaultEnvironmentHost() throws {
    let dir = try tempDir()
    defer { try? FileManager.default.removeItem(at: dir) }
    try "k".write(to: dir.appendingPathComponent("k.p8"), atomically: true, encoding: .utf8)
    let c = try VolleyConfiguration.parse(
        yaml: """
            apps:
              - name: A
                apns: {keyFile: k.p8, keyId: K, teamId: T, topic: com.x}
            """, baseDirectory: dir)
    #expect(c.apps.first?.apns?.effectiveHost == "api.push.apple.com")
    #expect(c.apps.first?.apns?.effectivePort == 443)
}

@Test func everyProblemIsListedWithItsKey() throws {
    let yaml = """
        apps:
          - name: Bad
            apns:
              keyFile: /nonexistent/key.p8
              topic: com.x
              environment: staging
        redis:
          url: http://nope
        worker:
          inflight: 3
          batchSize: 0
        log:
          level: loud
        """
    do {
        _ = try VolleyConfiguration.parse(yaml: yaml, baseDirectory: nil)
        Issue.record("expected a ConfigurationError")
    } catch let e as ConfigurationError {
        let text = e.description
        #expect(text.contains("apps[Bad].apns.keyFile: file not found"))
        #expect(text.contains("apps[Bad].apns.keyId: required"))
        #expect(text.contains("apps[Bad].apns.teamId: required"))
        #expect(text.contains("apps[Bad].apns.environment: must be production or sandbox"))
        #expect(text.contains("redis.url: must look like"))
        #expect(text.contains("worker.inflight: unknown key (did you mean 'inFlight'?)"))
        #expect(text.contains("worker.batchSize: must be between 1"))
        #expect(text.contains("log.level: must be one of"))
        #expect(e.problems.count == 8)
    }
}

@Test func environmentVariablesOverrideEveryKey() throws {
    let dir = try tempDir()
    defer { try? FileManager.default.removeItem(at: dir) }
    try "k".write(to: dir.appendingPathComponent("k.p8"), atomically: true, encoding: .utf8)
    let env = [
        "VOLLEY_REDIS_URL": "redis://user:pw@10.0.0.1:6380/2",
        "VOLLEY_WORKER_IN_FLIGHT": "77",
        "VOLLEY_APPS_TEST_APP_APNS_KEY_ID": "OVERRIDDEN",
        "VOLLEY_APPS_TEST_APP_APNS_PORT": "2197",
    ]
    let c = try VolleyConfiguration.parse(
        yaml: """
            apps:
              - name: Test_App
                apns: {keyFile: k.p8, keyId: K, teamId: T, topic: com.x}
            """, baseDirectory: dir, environment: env)
    #expect(c.redis.url == "redis://user:pw@10.0.0.1:6380/2")
    #expect(c.worker.inFlight == 77)
    #expect(
        c.apps.first?.apns?.auth
            == .token(keyFile: dir.appendingPathComponent("k.p8").path, keyId: "OVERRIDDEN", teamId: "T"))
    #expect(c.apps.first?.apns?.effectivePort == 2197)
}

@Test func envNamesAreUpperSnakeCase() {
    #expect(EnvironmentOverrides.envName(["worker", "inFlight"]) == "VOLLEY_WORKER_IN_FLIGHT")
    #expect(
        EnvironmentOverrides.envName(["apps", "Test_App", "fcm", "serviceAccountFile"])
            == "VOLLEY_APPS_TEST_APP_FCM_SERVICE_ACCOUNT_FILE")
}

@Test func appOrgsDefaultToEveryOrgAndWarnWhenSeveralAppsExist() throws {
    let dir = try tempDir()
    defer { try? FileManager.default.removeItem(at: dir) }
    try "k".write(to: dir.appendingPathComponent("k.p8"), atomically: true, encoding: .utf8)
    try "{}".write(to: dir.appendingPathComponent("sa.json"), atomically: true, encoding: .utf8)
    let one = try VolleyConfiguration.parse(
        yaml: """
            apps:
              - name: A
                apns: {keyFile: k.p8, keyId: K, teamId: T, topic: com.x}
            """, baseDirectory: dir)
    #expect(one.apps.first?.orgs == .any)
    #expect(one.warnings.isEmpty)
    let several = try VolleyConfiguration.parse(
        yaml: """
            apps:
              - name: A
                orgs: ["00Dorg1", "00Dorg2"]
                apns: {keyFile: k.p8, keyId: K, teamId: T, topic: com.x}
              - name: B
                fcm: {serviceAccountFile: sa.json, maxStreams: 7}
              - name: C
                orgs: ["*"]
                fcm: {serviceAccountFile: sa.json}
            """, baseDirectory: dir)
    let a = try #require(several.app(named: "A"))
    #expect(a.orgs.allows("00Dorg1") && a.orgs.allows("00Dorg2") && !a.orgs.allows("00Dother"))
    #expect(several.app(named: "C")?.orgs.allows("00Dother") == true)
    #expect(several.warnings.count == 1)
    #expect(several.warnings.first?.hasPrefix("apps[B].orgs is not set") == true)
    // fcm.maxStreams reaches the provider's configuration.
    #expect(ProviderApps.from(several).first { $0.name == "B" }?.fcm?.maxConcurrentStreams == 7)
}

@Test func badOrgsAndBadMetricsKeysStopStartupNamingTheKey() throws {
    let dir = try tempDir()
    defer { try? FileManager.default.removeItem(at: dir) }
    try "k".write(to: dir.appendingPathComponent("k.p8"), atomically: true, encoding: .utf8)
    do {
        _ = try VolleyConfiguration.parse(
            yaml: """
                metrics:
                  port: 70000
                  enable: true
                apps:
                  - name: A
                    orgs: []
                    apns: {keyFile: k.p8, keyId: K, teamId: T, topic: com.x}
                  - name: B
                    orgs: "00Dorg1"
                    apns: {keyFile: k.p8, keyId: K, teamId: T, topic: com.x}
                worker:
                  inFlght: 10
                """, baseDirectory: dir)
        Issue.record("expected a configuration error")
    } catch let e as ConfigurationError {
        #expect(e.problems.contains { $0.hasPrefix("metrics.port: ") })
        #expect(e.problems.contains { $0.hasPrefix("metrics.enable: unknown key") })
        #expect(e.problems.contains { $0.hasPrefix("apps[A].orgs: must be a non-empty list") })
        #expect(e.problems.contains { $0.hasPrefix("apps[B].orgs: must be a non-empty list") })
        #expect(e.problems.contains("worker.inFlght: unknown key (did you mean 'inFlight'?)"))
    }
}

@Test func metricsSectionDefaultsAndOverrides() throws {
    let defaults = try VolleyConfiguration.parse(yaml: "", baseDirectory: nil)
    #expect(defaults.metrics == MetricsSettings())
    #expect(defaults.metrics.enabled && defaults.metrics.host == "0.0.0.0" && defaults.metrics.port == 9464)
    let c = try VolleyConfiguration.parse(
        yaml: """
            metrics:
              enabled: false
              host: 127.0.0.1
            """, baseDirectory: nil, environment: ["VOLLEY_METRICS_PORT": "0"])
    #expect(!c.metrics.enabled)
    #expect(c.metrics.host == "127.0.0.1")
    #expect(c.metrics.port == 0)
}

@Test func streamShardsDefaultsToOneAndReachesTheStore() throws {
    let one = try VolleyConfiguration.parse(yaml: "redis:\n  url: unix:///tmp/r.sock\n", baseDirectory: nil)
    #expect(one.worker.streamShards == 1)
    #expect(try PipelineSettings(one).store.jobStreams == ["volley:jobs"])
    let three = try VolleyConfiguration.parse(
        yaml: "redis:\n  url: unix:///tmp/r.sock\nworker:\n  streamShards: 3\n", baseDirectory: nil)
    #expect(three.worker.streamShards == 3)
    let store = try PipelineSettings(three).store
    #expect(store.streamShards == 3)
    #expect(store.jobStreams == ["volley:jobs:{jobs0}", "volley:jobs:{jobs1}", "volley:jobs:{jobs2}"])
    let env = try VolleyConfiguration.parse(
        yaml: "redis:\n  url: unix:///tmp/r.sock\n", baseDirectory: nil,
        environment: ["VOLLEY_WORKER_STREAM_SHARDS": "4"])
    #expect(env.worker.streamShards == 4)
}

@Test(arguments: [
    ("streamShards: 0", "worker.streamShards: must be between 1 and 1024, got 0"),
    ("streamShards: many", "worker.streamShards: must be an integer"),
    ("streamShards: 5000", "worker.streamShards: must be between 1 and 1024, got 5000"),
    ("streamShards: 2\n  stream: \"{volley}:jobs\"", "worker.stream: must not contain '{' when worker.streamShards"),
    ("streamShards: 2\n  reportStream: \"r{x}\"", "worker.reportStream: must not contain '{'"),
])
func invalidStreamShardsStopStartupNamingTheKey(worker: String, problem: String) throws {
    do {
        _ = try VolleyConfiguration.parse(
            yaml: "redis:\n  url: unix:///tmp/r.sock\nworker:\n  \(worker)\n", baseDirectory: nil)
        Issue.record("expected a ConfigurationError for \(worker)")
    } catch let e as ConfigurationError {
        #expect(e.problems.count == 1)
        #expect(e.description.contains(problem), "\(e.description)")
    }
}

@Test func theRemovedRedisPipelinesKeyStopsStartupNamingIt() throws {
    do {
        _ = try VolleyConfiguration.parse(
            yaml: """
                api:
                  redisPipelines: 2
                  redisConnections: 8
                """, baseDirectory: nil)
        Issue.record("expected a configuration error")
    } catch let e as ConfigurationError {
        #expect(e.problems.count == 1, "\(e.problems)")
        #expect(e.problems.first?.hasPrefix("api.redisPipelines: removed: ") == true, "\(e.problems)")
        #expect(e.problems.first?.hasSuffix("delete this key") == true)
    }
    do {
        _ = try VolleyConfiguration.parse(
            yaml: "", baseDirectory: nil, environment: ["VOLLEY_API_REDIS_PIPELINES": "0"])
        Issue.record("expected a configuration error")
    } catch let e as ConfigurationError {
        #expect(e.problems.first?.hasPrefix("api.redisPipelines: removed: ") == true, "\(e.problems)")
    }
    let c = try VolleyConfiguration.parse(yaml: "api:\n  redisConnections: 8\n", baseDirectory: nil)
    #expect(c.api.redisConnections == 8)
}
