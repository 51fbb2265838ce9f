import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// Every input in Fuzz/Corpus (the fuzzer's seeds, and any input that once found a bug) read as a job is read:
/// what parses writes back to text that parses to the same value, and the job reader answers without crashing.
@Suite(.tags(.unit)) struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus")

    static func inputs() throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test func theCorpusIsThere() throws {
        #expect(try Self.inputs().count >= 5)
    }

    @Test func everyInputReadsAndWritesBackTheSame() throws {
        for file in try Self.inputs() {
            let bytes = try Data(contentsOf: file)
            guard let value = try? JSONValue(parsing: bytes) else { continue }
            let written = value.encoded()
            #expect(try JSONValue(parsing: written) == value, "\(file.lastPathComponent)")
            if case .object(let object) = value {
                _ = JobKeys.unknownKeys(in: object)
                _ = try? PushJob(json: value, defaultOrg: "org")
            }
        }
    }
}
