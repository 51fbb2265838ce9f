import ArgumentParser

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Benchmarks (transport; end to end).",
                                                    subcommands: [BenchE2E.self])
}
