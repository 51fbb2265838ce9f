// swift-tools-version: 6.1
// Fuzz targets for the readers of untrusted JSON: a job (stream entry or POST /v1/jobs body) and the
// Salesforce-compatible bodies (custom notification action, Connect push). libFuzzer drives them; build and run
// with tools/fuzz from the repository root (it passes -sanitize=fuzzer,address).
import PackageDescription

let package = Package(
    name: "VolleyFuzz",
    dependencies: [.package(name: "Volley", path: "..")],
    targets: [
        .executableTarget(
            name: "VolleyFuzz",
            dependencies: [
                .product(name: "VolleyCore", package: "Volley"),
                .product(name: "VolleyConnect", package: "Volley"),
            ],
            path: "Sources/VolleyFuzz"
        )
    ]
)
