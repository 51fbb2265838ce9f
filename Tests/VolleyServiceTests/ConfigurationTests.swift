import Foundation
import Logging
import Testing
import VolleyCore
import VolleyHTTP2
import VolleyTestTags

@testable import VolleyService

private func tempDir() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("volley-config-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

@Test(.tags(.unit)) func parsesTheContractKeysAndResolvesRelativePaths() throws {
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
    let client = try #require(ProviderApps.from(c).first?.apns).clientConfiguration(for: apns.environment)
    #expect(client.host == "127.0.0.1")
    #expect(client.port == 8443)
    #expect(app.fcm?.endpoint == "https://127.0.0.1:8443")
    #expect(c.redis.url == "unix:///tmp/r.sock")
    #expect(c.worker.inFlight == 100)
    #expect(c.worker.stream == "volley:jobs")
}

@Test(.tags(.unit)) func productionIsTheDefaultEnvironmentHost() throws {
    let dir = try tempDir()
    defer { try? FileManager.default.removeItem(at: dir) }
    try "k".write(to: dir.appendingPathComponent("k.p8"), atomically: true, encoding: .utf8)
    let c = try VolleyConfiguration.parse(
        yaml: """
            apps:
              - name: A
                apns: {keyFile: k.p8, keyId: K, teamId: T, topic: com.x}
            """, baseDirectory: dir)
    let apns = try #require(ProviderApps.from(c).first?.apns)
    #expect(apns.clientConfiguration(for: .production).host == "api.push.apple.com")
    #expect(apns.clientConfiguration(for: .sandbox).host == "api.sandbox.push.apple.com")
    #expect(apns.clientConfiguration(for: .production).port == 443)
}

@Test(.tags(.unit)) func everyProblemIsListedWithItsKey() throws {
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

@Test(.tags(.unit)) func environmentVariablesOverrideEveryKey() throws {
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
    #expect(ProviderApps.from(c).first?.apns?.clientConfiguration(for: .production).port == 2197)
}

@Test(.tags(.unit)) func envNamesAreUpperSnakeCase() {
    #expect(EnvironmentOverrides.envName(["worker", "inFlight"]) == "VOLLEY_WORKER_IN_FLIGHT")
    #expect(
        EnvironmentOverrides.envName(["apps", "Test_App", "fcm", "serviceAccountFile"])
            == "VOLLEY_APPS_TEST_APP_FCM_SERVICE_ACCOUNT_FILE")
}

@Test(.tags(.unit)) func appOrgsDefaultToEveryOrgAndWarnWhenSeveralAppsExist() throws {
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

@Test(.tags(.unit)) func badOrgsAndBadMetricsKeysStopStartupNamingTheKey() throws {
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

@Test(.tags(.unit)) func metricsSectionDefaultsAndOverrides() throws {
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

@Test(.tags(.unit)) func streamShardsDefaultsToOneAndReachesTheStore() throws {
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

@Test(
    .tags(.unit),
    arguments: [
        ("streamShards: 0", "worker.streamShards: must be between 1 and 1024, got 0"),
        ("streamShards: many", "worker.streamShards: must be an integer"),
        ("streamShards: 5000", "worker.streamShards: must be between 1 and 1024, got 5000"),
        (
            "streamShards: 2\n  stream: \"{volley}:jobs\"",
            "worker.stream: must not contain '{' when worker.streamShards"
        ),
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

/// `redis.url` takes what the Redis client takes, and its problems never show the password.
@Test(.tags(.unit)) func redisURLsAreCheckedByTheClientsParserWithoutShowingThePassword() throws {
    for good in ["redis://127.0.0.1:6379/0", "redis://:pw@h:6380", "unix:///tmp/r.sock", "unix://u:pw@/tmp/r.sock"] {
        #expect(RedisURLCheck.problem(good) == nil, "\(good)")
    }
    for bad in ["http://u:s3cret@h", "redis://u:s3cret@h:99999", "redis://u:s3cret@:6379", "unix://u:s3cret@rel.sock"] {
        let problem = try #require(RedisURLCheck.problem(bad), "\(bad)")
        #expect(!problem.contains("s3cret"), "\(problem)")
        #expect(problem.contains("***@"), "\(problem)")
    }
}

/// An empty APNs host or CA file stops startup naming the key, instead of a campaign failing device by device.
@Test(.tags(.unit)) func emptyHostsAndCAFilesStopStartupNamingTheKey() throws {
    let dir = try tempDir()
    defer { try? FileManager.default.removeItem(at: dir) }
    try "k".write(to: dir.appendingPathComponent("k.p8"), atomically: true, encoding: .utf8)
    let yaml = """
        apps:
          - name: A
            apns: {keyFile: k.p8, keyId: K, teamId: T, topic: com.x, host: "", caFile: ""}
            fcm: {serviceAccountFile: k.p8, caFile: " "}
        """
    #expect {
        try VolleyConfiguration.parse(yaml: yaml, baseDirectory: dir)
    } throws: { error in
        let text = "\(error)"
        return text.contains("apps[A].apns.host: must name a host")
            && text.contains("apps[A].apns.caFile: must name a file")
            && text.contains("apps[A].fcm.caFile: must name a file")
    }
}

@Test(.tags(.unit)) func theRemovedRedisPipelinesKeyStopsStartupNamingIt() throws {
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

@Test(.tags(.unit)) func providerOutageSecondsDefaultsTo120AndReachesThePools() throws {
    let base = try VolleyConfiguration.parse(yaml: "redis:\n  url: unix:///tmp/r.sock\n", baseDirectory: nil)
    #expect(base.worker.providerOutageSeconds == 120)
    let set = try VolleyConfiguration.parse(
        yaml: "redis:\n  url: unix:///tmp/r.sock\nworker:\n  providerOutageSeconds: 45.5\n", baseDirectory: nil)
    #expect(set.worker.providerOutageSeconds == 45.5)
    let env = try VolleyConfiguration.parse(
        yaml: "redis:\n  url: unix:///tmp/r.sock\n", baseDirectory: nil,
        environment: ["VOLLEY_WORKER_PROVIDER_OUTAGE_SECONDS": "7"])
    #expect(env.worker.providerOutageSeconds == 7)
    // The pools the providers get carry it (APNs and FCM share the factory).
    let pools = ProviderTransport.pools(logger: Logger(label: "test"), providerOutageSeconds: 45.5)
    let pool = try pools(HTTP2ClientConfiguration(host: "127.0.0.1", port: 21_999))
    #expect((pool as? HTTP2ConnectionPool)?.configuration.providerOutageSeconds == 45.5)
    pool.shutdown {}
}

@Test(
    .tags(.unit),
    arguments: [
        ("providerOutageSeconds: 0", "worker.providerOutageSeconds: must be at least 0.001, got 0.0"),
        ("providerOutageSeconds: -3", "worker.providerOutageSeconds: must be at least 0.001"),
        ("providerOutageSeconds: soon", "worker.providerOutageSeconds: must be a number"),
        ("providerOutageSeconds: 100000", "worker.providerOutageSeconds: must be at most 86400"),
    ])
func invalidProviderOutageSecondsStopsStartupNamingTheKey(worker: String, problem: String) throws {
    do {
        _ = try VolleyConfiguration.parse(
            yaml: "redis:\n  url: unix:///tmp/r.sock\nworker:\n  \(worker)\n", baseDirectory: nil)
        Issue.record("expected a ConfigurationError for \(worker)")
    } catch let e as ConfigurationError {
        #expect(e.problems.count == 1)
        #expect(e.description.contains(problem), "\(e.description)")
    }
}

@Test(.tags(.unit)) func scheduleAndOrgZonesAreReadAndBadValuesNamedByKey() throws {
    let c = try VolleyConfiguration.parse(
        yaml: """
            schedule: {maxAheadDays: 7}
            orgs:
              - {id: orgA, timeZone: Europe/Berlin}
              - {id: orgB}
            """, baseDirectory: nil)
    #expect(c.schedule.maxAheadDays == 7)
    let settings = try PipelineSettings(c)
    #expect(settings.worker.scheduleMaxAheadDays == 7)
    #expect(settings.worker.orgTimeZones == ["orgA": TimeZone(identifier: "Europe/Berlin")!])
    #expect(try c.apiConfiguration().scheduleMaxAheadDays == 7)
    #expect(try VolleyConfiguration.parse(yaml: "", baseDirectory: nil).schedule.maxAheadDays == 30)
    do {
        _ = try VolleyConfiguration.parse(
            yaml: """
                schedule: {maxAheadDays: 0, maxAhead: 3}
                orgs:
                  - {id: orgA, timeZone: Mars/Olympus}
                  - {timeZone: UTC}
                """, baseDirectory: nil)
        Issue.record("expected a ConfigurationError")
    } catch let e as ConfigurationError {
        let text = e.description
        #expect(text.contains("schedule.maxAheadDays: must be between 1"), "\(text)")
        #expect(text.contains("schedule.maxAhead: unknown key"), "\(text)")
        #expect(text.contains("orgs[0].timeZone: 'Mars/Olympus' is not an IANA time zone"), "\(text)")
        #expect(text.contains("orgs[1].id: required"), "\(text)")
    }
}

/// Every scalar key of the `api` section takes its environment override, as docs/api.md says: the table below must
/// name each key the section reads, so a new key without an override fails here.
@Test(.tags(.unit)) func everyAPIKeyTakesItsEnvironmentOverride() throws {
    let cases: [(key: String, value: String, holds: (APISettings) -> Bool)] = [
        ("host", "10.1.2.3", { $0.host == "10.1.2.3" }),
        ("port", "8181", { $0.port == 8181 }),
        ("maxBodyBytes", "4096", { $0.maxBodyBytes == 4096 }),
        ("drainSeconds", "7.5", { $0.drainSeconds == 7.5 }),
        ("redisConnections", "3", { $0.redisConnections == 3 }),
        ("keyCacheSeconds", "9", { $0.keyCacheSeconds == 9 }),
        ("headerTimeoutSeconds", "3.5", { $0.headerTimeoutSeconds == 3.5 }),
        ("idleTimeoutSeconds", "11", { $0.idleTimeoutSeconds == 11 }),
        ("maxConnections", "123", { $0.maxConnections == 123 }),
        ("readinessTimeoutSeconds", "4", { $0.readinessTimeoutSeconds == 4 }),
        ("tasksOnEventLoops", "false", { $0.tasksOnEventLoops == false }),
    ]
    #expect(Set(cases.map(\.key)) == APISettings.keys)
    let defaults = try VolleyConfiguration.parse(yaml: "", baseDirectory: nil).api
    for c in cases {
        #expect(!c.holds(defaults), "\(c.key)'s test value is its default")
        let name = EnvironmentOverrides.envName(["api", c.key])
        let parsed = try VolleyConfiguration.parse(yaml: "", baseDirectory: nil, environment: [name: c.value]).api
        #expect(c.holds(parsed), "\(name)=\(c.value) was not applied")
    }
    #expect(EnvironmentOverrides.envName(["api", "maxConnections"]) == "VOLLEY_API_MAX_CONNECTIONS")
}

/// `events` and `deliveries` reach the store's configuration; a cluster gets one event stream per org; bad values stop
/// startup naming the key.
@Test(.tags(.unit)) func eventsAndDeliveriesReachTheStoreAndBadValuesAreNamed() throws {
    let plain = try PipelineSettings(
        try VolleyConfiguration.parse(yaml: "redis:\n  url: unix:///tmp/r.sock\n", baseDirectory: nil)
    ).store
    #expect(plain.eventsEnabled && plain.eventsMaxLength == 1_000_000 && plain.eventsMaxAgeSeconds == 604_800)
    #expect(plain.deliveryHistoryDays == 0 && !plain.eventsOutcomes && !plain.recordsTrail)
    #expect(plain.eventStream(org: "o1") == "volley:events")
    let yaml = """
        redis:
          cluster: ["127.0.0.1:7000"]
        events:
          enabled: false
          outcomes: true
          maxLength: 5000
          maxAgeSeconds: 3600
        deliveries:
          days: 30
        """
    let set = try PipelineSettings(try VolleyConfiguration.parse(yaml: yaml, baseDirectory: nil)).store
    #expect(!set.eventsEnabled && set.eventsMaxLength == 5_000 && set.eventsMaxAgeSeconds == 3_600)
    #expect(set.deliveryHistoryDays == 30 && set.eventStream(org: "o1") == "volley:events:{o1}")
    #expect(set.eventsOutcomes && set.recordsTrail)
    let bad = "events:\n  enabled: maybe\n  maxLength: 10\n  extra: 1\ndeliveries:\n  days: 91\n"
    #expect {
        try VolleyConfiguration.parse(yaml: bad, baseDirectory: nil)
    } throws: { error in
        let text = "\(error)"
        return text.contains("events.enabled") && text.contains("events.maxLength") && text.contains("events.extra")
            && text.contains("deliveries.days")
    }
}

@Test(.tags(.unit)) func unansweredSendsDefaultsToResendAndReachesTheWorkerAndThePools() throws {
    let base = try VolleyConfiguration.parse(yaml: "redis:\n  url: unix:///tmp/r.sock\n", baseDirectory: nil)
    #expect(base.worker.unansweredSends == .resend)
    #expect(try PipelineSettings(base).worker.unansweredSends == .resend)
    let env = try VolleyConfiguration.parse(
        yaml: "redis:\n  url: unix:///tmp/r.sock\n", baseDirectory: nil,
        environment: ["VOLLEY_WORKER_UNANSWERED_SENDS": "fail"])
    #expect(env.worker.unansweredSends == .fail)
    #expect(try PipelineSettings(env).worker.unansweredSends == .fail)
    for resend in [true, false] {
        let pool = try ProviderTransport.pools(logger: Logger(label: "test"), resendUnanswered: resend)(
            HTTP2ClientConfiguration(host: "127.0.0.1", port: 21_999))
        #expect((pool as? HTTP2ConnectionPool)?.configuration.resendUnanswered == resend)
        pool.shutdown {}
    }
    do {
        _ = try VolleyConfiguration.parse(
            yaml: "redis:\n  url: unix:///tmp/r.sock\nworker:\n  unansweredSends: retry\n", baseDirectory: nil)
        Issue.record("expected a ConfigurationError")
    } catch let e as ConfigurationError {
        #expect(e.problems == ["worker.unansweredSends: must be resend or fail, got 'retry'"], "\(e.problems)")
    }
}

/// `worker.deviceKeyCacheSize`: the worker's parsed device keys (default 10,000), from the file or the environment
/// like every key, and refused out of range naming the key.
@Test(.tags(.unit)) func theDeviceKeyCacheSizeIsAWorkerKey() throws {
    let base = try VolleyConfiguration.parse(yaml: "redis:\n  url: unix:///tmp/r.sock\n", baseDirectory: nil)
    #expect(base.worker.deviceKeyCacheSize == 10_000)
    let set = try VolleyConfiguration.parse(
        yaml: "redis:\n  url: unix:///tmp/r.sock\nworker:\n  deviceKeyCacheSize: 500\n", baseDirectory: nil)
    #expect(set.worker.deviceKeyCacheSize == 500)
    let env = try VolleyConfiguration.parse(
        yaml: "redis:\n  url: unix:///tmp/r.sock\n", baseDirectory: nil,
        environment: ["VOLLEY_WORKER_DEVICE_KEY_CACHE_SIZE": "2000"])
    #expect(env.worker.deviceKeyCacheSize == 2_000)
    #expect(throws: ConfigurationError.self) {
        try VolleyConfiguration.parse(
            yaml: "redis:\n  url: unix:///tmp/r.sock\nworker:\n  deviceKeyCacheSize: 1\n", baseDirectory: nil)
    }
}
