import Foundation
import Testing
import VolleyAPI
import VolleyMock
import VolleyService
import VolleyTestTags

/// `api.tls`: the API over HTTPS with a throwaway CA and server certificate (the mock's), checked by curl trusting
/// only that CA; and startup refusing files that cannot serve, naming the key to fix.
@Suite(.serialized, .tags(.integration)) struct APITLSTests {
    struct CurlAnswer {
        var exitCode: Int32
        /// `%{http_code} %{http_version}`, e.g. `202 1.1`; `000 0` when no HTTP answer came.
        var summary: String
        var body: String
    }

    /// Runs curl off the cooperative pool (the server under test answers on it) and waits for it to exit.
    static func curl(_ arguments: [String]) async throws -> CurlAnswer {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("volley-curl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let bodyFile = dir.appendingPathComponent("body").path
        let summaryFile = dir.appendingPathComponent("summary").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments =
            ["-sS", "--max-time", "60", "-o", bodyFile, "-w", "%{http_code} %{http_version}"] + arguments
        process.standardOutput = try FileHandle(forWritingTo: createdFile(summaryFile))
        process.standardError = FileHandle.nullDevice
        let code: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { p in continuation.resume(returning: p.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        return CurlAnswer(
            exitCode: code,
            summary: (try? String(contentsOfFile: summaryFile, encoding: .utf8)) ?? "",
            body: (try? String(contentsOfFile: bodyFile, encoding: .utf8)) ?? "")
    }

    static func createdFile(_ path: String) -> URL {
        FileManager.default.createFile(atPath: path, contents: nil)
        return URL(fileURLWithPath: path)
    }

    static func tlsSection(cert: String, key: String) -> String {
        "  tls:\n    certFile: \"\(cert)\"\n    keyFile: \"\(key)\""
    }

    @Test func theAPIAnswersOverHTTPSAndRefusesPlainHTTP() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let pki = try MockCredentials.loadOrCreate(stateDirectory: w.mock.stateDirectory)
        let api = try await RunningAPI(
            configFile: try APIServerTests.config(
                w, extra: Self.tlsSection(cert: pki.serverCertificateFile, key: pki.serverKeyFile)))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let https = "https://127.0.0.1:\(api.port)"

        let livez = try await Self.curl(["--cacert", pki.caFile, https + "/livez"])
        #expect(livez.exitCode == 0)
        #expect(livez.summary == "200 1.1", "\(livez.summary) \(livez.body)")
        #expect(livez.body.contains("ok"))

        let job = try await Self.curl([
            "--cacert", pki.caFile, "-X", "POST", https + "/v1/jobs", "-H", "Authorization: Bearer \(send)",
            "-H", "Content-Type: application/json",
            "-d", #"{"app":"app1","recipients":["u"],"notification":{"title":"x"}}"#,
        ])
        #expect(job.summary == "202 1.1", "\(job.summary) \(job.body)")
        #expect(try APIServerTests.streamLength(w) == 1)

        // A body of many TLS records arrives whole, and one kept-alive connection carries several requests: curl
        // given three URLs on one host reuses its connection (`%{num_connects}` counts the new ones).
        let document = OpenAPIDocument.yaml
        #expect(document.utf8.count > 100_000)
        let big = try await Self.curl(["--cacert", pki.caFile, https + "/openapi.yaml"])
        #expect(big.summary == "200 1.1", "\(big.summary)")
        #expect(big.body == document)
        let reused = try await Self.curl([
            "--cacert", pki.caFile, "-w", "%{http_code} %{num_connects};", "-o", "/dev/null", "-o", "/dev/null",
            https + "/livez", https + "/livez", https + "/livez",
        ])
        #expect(reused.exitCode == 0)
        #expect(reused.summary == "200 1;200 0;200 0;", "\(reused.summary)")
        // A request body of many records (a job whose data is 200 KB) is read whole: the answer judges the job (too
        // large for a push), not a body cut short (malformed JSON, or no answer at all).
        let padding = String(repeating: "x", count: 200_000)
        let bodyFile = w.dir.appendingPathComponent("large-job.json").path
        try (#"{"app":"app1","recipients":["u"],"notification":{"title":"x"},"data":{"pad":""# + padding + #""}}"#)
            .write(toFile: bodyFile, atomically: true, encoding: .utf8)
        let large = try await Self.curl([
            "--cacert", pki.caFile, "-X", "POST", https + "/v1/jobs", "-H", "Authorization: Bearer \(send)",
            "-H", "Content-Type: application/json", "--data-binary", "@" + bodyFile,
        ])
        #expect(large.exitCode == 0)
        #expect(large.summary.hasSuffix(" 1.1") && !large.summary.hasPrefix("000"), "\(large.summary)")
        #expect(!large.body.contains("malformed JSON"), "\(large.body)")

        // Without the CA the certificate is not trusted: the client refuses, nothing is served in clear.
        let untrusted = try await Self.curl([https + "/livez"])
        #expect(untrusted.exitCode != 0)
        // Plain HTTP to the TLS port gets no HTTP answer.
        let plain = try await Self.curl(["http://127.0.0.1:\(api.port)/livez"])
        #expect(plain.exitCode != 0)
        #expect(!plain.summary.hasPrefix("200"))
        await api.stop()
    }

    @Test func filesThatCannotServeStopStartupNamingTheKey() throws {
        let w = try MockWorld()
        defer { w.stop() }
        let pki = try MockCredentials.loadOrCreate(stateDirectory: w.mock.stateDirectory)
        func startupError(cert: String, key: String) -> String {
            do {
                let path = try APIServerTests.config(w, extra: Self.tlsSection(cert: cert, key: key))
                _ = try APIRunner.server(
                    configuration: try VolleyConfiguration.load(path: path), logger: .init(label: "api-tls-test"))
                return ""
            } catch {
                return "\(error)"
            }
        }
        let missing = startupError(cert: pki.serverCertificateFile, key: w.dir.path + "/absent.key")
        #expect(missing.contains("api.tls.keyFile"), "\(missing)")
        let missingCert = startupError(cert: w.dir.path + "/absent.pem", key: pki.serverKeyFile)
        #expect(missingCert.contains("api.tls.certFile"), "\(missingCert)")

        let garbage = w.dir.appendingPathComponent("garbage.pem").path
        try "not a certificate\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        let badCert = startupError(cert: garbage, key: pki.serverKeyFile)
        #expect(badCert.contains("api.tls.certFile"), "\(badCert)")
        let badKey = startupError(cert: pki.serverCertificateFile, key: garbage)
        #expect(badKey.contains("api.tls.keyFile"), "\(badKey)")

        // The client certificate's key is a valid key, but not the server certificate's.
        let mismatched = startupError(cert: pki.serverCertificateFile, key: pki.clientKeyFile)
        #expect(mismatched.contains("api.tls.keyFile"), "\(mismatched)")
        #expect(mismatched.contains("does not match"), "\(mismatched)")

        #expect(startupError(cert: pki.serverCertificateFile, key: pki.serverKeyFile) == "")
    }
}
