import ArgumentParser

struct TestPush: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "test-push", abstract: "Send one notification and print what the provider answered.")
}
