// swift-tools-version: 6.1
// Micro-benchmarks for Volley (ordo-one/package-benchmark). Run from this folder:
//   swift package benchmark                              # run and print
//   swift package benchmark baseline check --check-absolute   # compare against Thresholds/
//   swift package --allow-writing-to-package-directory benchmark thresholds update
// Allocation counts per operation are checked in under Thresholds/ so a regression shows up in review.
import PackageDescription

let package = Package(
    name: "VolleyBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Volley", path: ".."),
        .package(url: "https://github.com/ordo-one/package-benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // Only for the renderer comparison (TemplateRender); Volley itself does not link it.
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.0.0"),
    ],
    targets: [
        .executableTarget(
            name: "VolleyMicro",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "VolleyService", package: "Volley"),
            ],
            path: "Benchmarks/VolleyMicro",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        // Personalized texts: Volley's template renderer beside swift-mustache on the same title and body per user.
        // Depends on VolleyCore alone, so `swift package benchmark --target TemplateRender` builds little.
        .executableTarget(
            name: "TemplateRender",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "VolleyCore", package: "Volley"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            path: "Benchmarks/TemplateRender",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
    ]
)
