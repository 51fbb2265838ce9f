import Foundation
import Logging
import VolleyCore
import VolleyStore

/// `volley devices import`: JSONL (`{"org","app","user","platform","token"[, "environment", "locale",
/// "rsaPublicKey", "cipherName", "timeZone"]}` per line) or CSV with a header naming those columns (a key's base64
/// has no comma).
/// Streams the file, registers in pipelined batches, reports progress. Each record is checked as every registration
/// is (`DeviceCommands.checked`).
public enum DeviceImport {
    public struct Result: Sendable, Hashable, Codable {
        public var imported = 0
        public var invalid = 0
        public var lines = 0
        /// The first few problems, with line numbers.
        public var problems: [String] = []
    }

    public enum Format: String, Sendable { case jsonl, csv }

    /// Imports `path`. `progress` is called after each batch with the running result.
    public static func run(
        path: String, session: RedisPipelineSession, batchSize: Int = 1000, format: Format? = nil,
        progress: (Result) -> Void = { _ in }
    ) throws -> Result {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw JobSubmission.InputError("cannot open \(path)")
        }
        defer { try? handle.close() }
        var result = Result()
        var batch: [DeviceImportRecord] = []
        var csvColumns: [String]?
        let fmt = format ?? (path.lowercased().hasSuffix(".csv") ? .csv : .jsonl)
        let decoder = JSONDecoder()

        func problem(_ line: Int, _ why: String) {
            result.invalid += 1
            if result.problems.count < 20 { result.problems.append("line \(line): \(why)") }
        }
        /// Checked as every registration is (`DeviceCommands.checked`); a refused line names the field.
        func accept(_ record: DeviceImportRecord, line: Int) {
            if let why = invalidReason(record) { return problem(line, why) }
            do {
                batch.append(try DeviceCommands.checked(record))
            } catch {
                problem(line, error.description)
            }
        }
        func flush() throws {
            if batch.isEmpty { return }
            try session.register(batch)
            result.imported += batch.count
            batch.removeAll(keepingCapacity: true)
            progress(result)
        }

        var lineNo = 0
        try forEachLine(handle) { raw in
            lineNo += 1
            result.lines = lineNo
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { return }
            switch fmt {
            case .jsonl:
                if let unknown = unknownKeysProblem(line, known: DeviceImportRecord.keys) {
                    problem(lineNo, unknown)
                    return
                }
                do {
                    let rec = try decoder.decode(DeviceImportRecord.self, from: Data(line.utf8))
                    accept(rec, line: lineNo)
                } catch {
                    problem(
                        lineNo,
                        "not a device record (need org, app, user, platform ios|android, token): \(shortError(error))")
                }
            case .csv:
                let cells = line.split(separator: ",", omittingEmptySubsequences: false)
                    .map {
                        $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                    }
                guard let cols = csvColumns else {
                    let header = cells.map { $0.lowercased() }
                    let missing = ["org", "app", "user", "platform", "token"].filter { !header.contains($0) }
                    if !missing.isEmpty {
                        throw JobSubmission.InputError(
                            "\(path): CSV header lacks \(missing.joined(separator: ", ")) (need "
                                + "org,app,user,platform,token[,environment,locale,rsaPublicKey,cipherName,timeZone])"
                        )
                    }
                    csvColumns = header
                    return
                }
                var d: [String: String] = [:]
                for (i, c) in cols.enumerated() where i < cells.count && !cells[i].isEmpty { d[c] = cells[i] }
                guard let org = d["org"], let app = d["app"], let user = d["user"], let token = d["token"],
                    let pName = d["platform"]
                else {
                    problem(lineNo, "missing org, app, user, platform or token")
                    return
                }
                guard let platform = Platform(rawValue: pName.lowercased()) else {
                    problem(lineNo, "platform '\(pName)' is not ios or android")
                    return
                }
                var env: APNSEnvironment?
                if let e = d["environment"] {
                    guard let v = APNSEnvironment(rawValue: e.lowercased()) else {
                        problem(lineNo, "environment '\(e)' is not sandbox or production")
                        return
                    }
                    env = v
                }
                let rec = DeviceImportRecord(
                    org: OrgID(org), app: AppName(app), user: UserID(user), platform: platform,
                    token: DeviceToken(token), environment: env, locale: d["locale"],
                    rsaPublicKey: d["rsapublickey"], cipherName: d["ciphername"], timeZone: d["timezone"])
                accept(rec, line: lineNo)
            }
            if batch.count >= batchSize { try flush() }
        }
        try flush()
        return result
    }

    static func invalidReason(_ r: DeviceImportRecord) -> String? {
        if r.org.rawValue.isEmpty || r.app.rawValue.isEmpty || r.user.rawValue.isEmpty {
            return "org, app and user must not be empty"
        }
        return nil
    }

    static func shortError(_ e: Error) -> String {
        if case DecodingError.keyNotFound(let k, _) = e { return "missing '\(k.stringValue)'" }
        if case DecodingError.dataCorrupted(let c) = e {
            return c.codingPath.isEmpty
                ? "invalid JSON" : "bad value at \(c.codingPath.map(\.stringValue).joined(separator: "."))"
        }
        return "\(e)"
    }

    /// Reads a file line by line in 64 KiB blocks (a file of millions of devices is never loaded whole).
    static func forEachLine(_ handle: FileHandle, _ body: (String) throws -> Void) throws {
        var buffer = Data()
        while true {
            let chunk = handle.readData(ofLength: 64 * 1024)
            if chunk.isEmpty { break }
            buffer.append(chunk)
            while let nl = buffer.firstIndex(of: 0x0A) {
                let lineData = buffer[buffer.startIndex..<nl]
                try body(String(decoding: lineData, as: UTF8.self))
                buffer.removeSubrange(buffer.startIndex...nl)
            }
        }
        if !buffer.isEmpty { try body(String(decoding: buffer, as: UTF8.self)) }
    }
}
