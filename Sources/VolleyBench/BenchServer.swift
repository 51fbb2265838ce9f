// `volley-bench serve`: a minimal APNs-shaped HTTP/2 server on VolleyHTTP2's HTTP2Server (answers 200,
// optional latency), for transport benchmarks when volley-mock is not wanted. Writes endpoints.json.
import Dispatch
import Foundation
import Logging
import VolleyHTTP2
import VolleyHTTP2Server

final class BenchHandler: HTTP2ServerHandler, @unchecked Sendable {
    let latencyMs: Int
    init(latencyMs: Int) { self.latencyMs = latencyMs }
    func connectionOpened(_ connection: HTTP2ServerConnection) {}
    func connectionClosed(_ connection: HTTP2ServerConnection) {}
    func handle(_ request: HTTP2ServerRequest, on connection: HTTP2ServerConnection, respond: HTTP2Responder) {
        let response = HTTP2Response(
            status: 200, headers: [HTTP2Header("apns-id", "00000000-0000-0000-0000-000000000000")])
        // The server's delayed-answer path (as volley-mock's): counted from the request's arrival, answers that fall
        // due together go out in one batch and one flush.
        respond(response, after: Double(latencyMs) / 1000)
    }
}

public enum BenchServer {
    static func openssl(_ args: [String], in dir: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw TransportBenchError("openssl \(args.first ?? "") failed") }
    }

    /// Makes a CA and a server certificate (IP:127.0.0.1, DNS:localhost), starts the server and writes
    /// `<stateDir>/endpoints.json`. Returns the server (keep it alive).
    public static func start(stateDir: String, port: Int, latencyMs: Int, maxStreams: UInt32, logger: Logger) throws
        -> HTTP2Server
    {
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try openssl(
            ["req", "-x509"] + ec + [
                "-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", "/CN=Volley Bench CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ], in: stateDir)
        try openssl(
            ["req"] + ec + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"], in: stateDir)
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n".write(
            toFile: stateDir + "/ext.cnf", atomically: true, encoding: .utf8)
        try openssl(
            [
                "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "server.pem", "-days", "30", "-extfile", "ext.cnf",
            ], in: stateDir)
        let cfg = HTTP2ServerConfiguration(
            certificateChainFile: stateDir + "/server.pem", privateKeyFile: stateDir + "/server.key",
            port: port, maxConcurrentStreams: maxStreams)
        let server = HTTP2Server(configuration: cfg, handler: BenchHandler(latencyMs: latencyMs), logger: logger)
        let bound = try server.start()
        let ep = BenchEndpoints(host: "127.0.0.1", port: bound, ca_file: stateDir + "/ca.pem", apns: nil)
        let data = try JSONEncoder().encode(ep)
        try data.write(to: URL(fileURLWithPath: stateDir + "/endpoints.json.tmp"))
        _ = rename(stateDir + "/endpoints.json.tmp", stateDir + "/endpoints.json")
        return server
    }
}
