// swift-tools-version: 6.1
// Volley: push-notification fan-out engine for Linux. Module map: docs/architecture.md. Arrows point down only:
// volley (CLI) → VolleyService → VolleyAPI, VolleyEngine, VolleyAPNs/VolleyFCM, VolleyStore → VolleyCore;
// volley-bench → VolleyBench → VolleyService (the load tools, never linked into `volley`);
// the providers → VolleyHTTP2, VolleyStore → VolleyRedis; the mock → VolleyHTTP2Server → VolleyHTTP2.
import PackageDescription

let package = Package(
    name: "Volley",
    products: [
        .executable(name: "volley", targets: ["volley"]),
        .executable(name: "volley-bench", targets: ["volley-bench"]),
        .executable(name: "volley-mock", targets: ["VolleyMockMain"]),
        .library(name: "VolleyHTTP2", targets: ["VolleyHTTP2"]),
        .library(name: "VolleyService", targets: ["VolleyService"]),
        // For the fuzz targets in Fuzz/: the readers of untrusted JSON.
        .library(name: "VolleyCore", targets: ["VolleyCore"]),
        .library(name: "VolleyConnect", targets: ["VolleyConnect"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.0.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.10.0"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.0.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
        // Without the default trait ConfigurationSupport: Volley reads its own configuration, and swift-configuration
        // would only add build time.
        .package(
            url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0", traits: ["FullFoundation"]),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.2.0"),
        // The console's pages (`/console`): logic-less templates that escape every value.
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.0.0"),
    ],
    targets: [
        // C libraries: one system-library target each, module map + shim.h for what Swift cannot call.
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CHiredis", pkgConfig: "hiredis", providers: [.apt(["libhiredis-dev"])]),

        // Value types, protocols, errors, clocks. No C, no I/O, no Dispatch.
        .target(name: "VolleyCore"),
        // TLS + nghttp2 + Dispatch sockets: client connections and the pool (its reconnect back-off from VolleyCore).
        .target(
            name: "VolleyHTTP2",
            dependencies: [
                "VolleyCore", "CNGHTTP2", "COpenSSL",
                .product(name: "Logging", package: "swift-log"),
                // The API's TLS channel handler: the same OpenSSL on NIO's event loops.
                .product(name: "NIOCore", package: "swift-nio"),
            ]),
        // The server side of HTTP/2 (listener, delayed answers, arrival-time BIO): only the mock and `bench serve`.
        .target(
            name: "VolleyHTTP2Server",
            dependencies: [
                "VolleyHTTP2", "COpenSSL",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // hiredis behind one small wrapper: pipelining, reconnect (VolleyCore's back-off), AUTH, scripts; and the
        // API's connections on NIO's event loops (RESP in and out, NOSCRIPT answered in one place).
        .target(
            name: "VolleyRedis",
            dependencies: [
                // VolleyHTTP2 for Volley's one TLS stack: Redis over TLS (`rediss://`).
                "VolleyCore", "CHiredis", "VolleyHTTP2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]),
        // Redis-backed implementations of VolleyCore's stores: job stream, device registry, ledger, quotas, reports.
        .target(
            name: "VolleyStore",
            dependencies: [
                "VolleyCore", "VolleyRedis",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Providers: request encoders, auth, response decoding into DeliveryOutcome.
        .target(
            name: "VolleyAPNs",
            dependencies: [
                "VolleyCore", "VolleyHTTP2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .target(
            name: "VolleyFCM",
            dependencies: [
                "VolleyCore", "VolleyHTTP2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // job → recipients → devices → quota → sends → outcomes → report → ack.
        // Sees only VolleyCore protocols.
        .target(
            name: "VolleyEngine",
            dependencies: [
                "VolleyCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]),
        // The operations endpoint: /metrics (a Prometheus registry), /livez and /readyz over HTTP/1.1, so the
        // worker and the API process serve the same registry and health checks.
        .target(
            name: "VolleyObservability",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // The Salesforce-compatible resources (custom notification action, Connect push, Notifications, settings):
        // one method per operation on VolleyCore's store protocols; VolleyAPI's router routes to them.
        .target(
            name: "VolleyConnect",
            dependencies: [
                "VolleyCore", "COpenSSL",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Configuration, bootstrap, lifecycle, the demo: the one place that wires things together.
        .target(
            name: "VolleyService",
            dependencies: [
                "VolleyCore", "VolleyHTTP2", "VolleyRedis", "VolleyStore", "VolleyAPNs", "VolleyFCM", "VolleyEngine",
                "VolleyObservability", "VolleyAPI", "VolleyConnect",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // The HTTP API (`volley api`): routes from openapi/volley.yaml, API keys, user tokens, rate limits, tenancy;
        // the console's pages under /console.
        .target(
            name: "VolleyAPI",
            dependencies: [
                "VolleyCore", "VolleyConnect", "VolleyHTTP2",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // Behind `volley-bench`: transport, end-to-end, sweep and provider benchmarks, the processes they start
        // (redis-server, volley-mock, workers, h2load, the aioapns peer), charts, and `bench serve`.
        .target(
            name: "VolleyBench",
            dependencies: [
                "VolleyService", "VolleyCore", "VolleyHTTP2", "VolleyHTTP2Server", "VolleyRedis", "VolleyStore",
                "VolleyAPNs",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                // ES256 JWTs for `volley-bench transport` requests to the mock.
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        // The CLI: worker, api, demo, send, devices, … (the product that runs in production).
        .executableTarget(
            name: "volley",
            dependencies: [
                "VolleyService", "VolleyAPI", "VolleyCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // `volley-bench`: the benchmarks' command line (transport, e2e, api, serve); starts `volley` and `volley-mock`.
        .executableTarget(
            name: "volley-bench",
            dependencies: [
                "VolleyBench", "VolleyService", "VolleyCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),

        // The mock APNs/FCM server (library so tests can run it in-process; `volley-mock` wraps it).
        .target(
            name: "VolleyMock",
            dependencies: [
                "VolleyCore", "VolleyHTTP2", "VolleyHTTP2Server",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
            ], path: "tools/VolleyMock"),
        .executableTarget(
            name: "VolleyMockMain",
            dependencies: [
                "VolleyMock",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ], path: "tools/VolleyMockMain"),

        // Test helpers: start redis-server on a unix socket, start the mock on a free port.
        // In-memory stand-ins for the engine's seams (a sender, the storage backend) and for the API's stores
        // (credentials, jobs, devices, types, inbox, quota): no sockets and no Redis.
        .target(
            name: "VolleyTestDoubles",
            dependencies: ["VolleyCore", .product(name: "Logging", package: "swift-log")],
            path: "Tests/VolleyTestDoubles"),
        // The `unit` and `integration` tags every suite carries (`tools/test --unit` runs the first lane alone).
        .target(name: "VolleyTestTags", path: "Tests/VolleyTestTags"),
        .target(
            name: "VolleyTestSupport",
            dependencies: [
                "VolleyMock", "VolleyHTTP2", "VolleyRedis",
            ], path: "Tests/VolleyTestSupport"),

        // Unit tests, one target per module; real redis-server and the mock only where the module owns the wire.
        .testTarget(name: "VolleyCoreTests", dependencies: ["VolleyCore", "VolleyTestTags", "VolleyTestDoubles"]),
        .testTarget(
            name: "VolleyHTTP2Tests",
            dependencies: [
                "VolleyTestTags", "VolleyHTTP2", "VolleyHTTP2Server", "CNGHTTP2", "VolleyTestDoubles",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "VolleyHTTP2ServerTests", dependencies: ["VolleyHTTP2", "VolleyHTTP2Server", "VolleyTestTags"]),
        .testTarget(
            name: "VolleyRedisTests",
            dependencies: [
                "VolleyRedis", "VolleyTestSupport", "VolleyTestDoubles", "VolleyTestTags",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]),
        .testTarget(
            name: "VolleyStoreTests",
            dependencies: [
                "VolleyTestTags", "VolleyStore", "VolleyRedis", "VolleyCore", "VolleyTestSupport", "VolleyTestDoubles",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "VolleyAPNsTests",
            dependencies: [
                "VolleyTestTags", "VolleyAPNs", "VolleyCore", "VolleyHTTP2",
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        .testTarget(
            name: "VolleyFCMTests",
            dependencies: [
                "VolleyTestTags", "VolleyFCM", "VolleyCore", "VolleyHTTP2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]),
        .testTarget(
            name: "VolleyEngineTests",
            dependencies: [
                "VolleyTestTags", "VolleyEngine", "VolleyCore", "VolleyTestDoubles",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]),
        .testTarget(
            name: "VolleyAPITests",
            dependencies: [
                "VolleyTestTags", "VolleyAPI", "VolleyCore", "VolleyConnect", "VolleyTestDoubles",
                // The router is called as the server calls it (RouterClient), not through HummingbirdTesting,
                // whose HTTP client (async-http-client, NIOHTTP2, swift-configuration) would be built for nothing.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
            ]),
        .testTarget(
            name: "VolleyConnectTests",
            dependencies: [
                "VolleyTestTags", "VolleyConnect", "VolleyCore", "VolleyTestDoubles",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "VolleyServiceTests",
            dependencies: [
                "VolleyTestTags", "VolleyService", "VolleyCore", "VolleyStore", "VolleyHTTP2", "VolleyTestDoubles",
                "VolleyTestSupport", .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "VolleyBenchTests",
            dependencies: [
                "VolleyTestTags", "VolleyBench", .product(name: "Logging", package: "swift-log"),
            ]),
        // The mock's own tests: its decisions in-process, and over real TLS with curl and h2load.
        .testTarget(
            name: "VolleyMockTests",
            dependencies: [
                "VolleyTestTags", "VolleyCore", "VolleyMock", "VolleyHTTP2", "VolleyHTTP2Server", "VolleyTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Across modules: engine + stores on a real redis-server, providers against the mock, `volley worker`
        // processes (they need `swift build` first: the tests start the built binary).
        .testTarget(
            name: "VolleyIntegrationTests",
            dependencies: [
                "VolleyTestTags", "VolleyEngine", "VolleyService", "VolleyStore", "VolleyRedis", "VolleyCore",
                "VolleyAPNs", "VolleyFCM",
                "VolleyHTTP2", "VolleyMock", "VolleyTestSupport", "VolleyTestDoubles", "VolleyAPI",
                "VolleyConnect",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]),
    ]
)
