import Foundation

/// The CSV form of a job's per-device outcomes (`GET /v1/jobs/{id}/outcomes`, `volley jobs outcomes`): RFC 4180
/// (CRLF line ends, a field holding a comma, a double quote, CR or LF is quoted and its quotes doubled), UTF-8, one
/// header line.
public enum OutcomeCSV {
    /// The header line: the columns in order.
    public static let header: [UInt8] = Array("platform,token,user,outcome,reason\r\n".utf8)
    /// The media type of the answer (RFC 4180 §3, RFC 7111's `header` parameter).
    public static let contentType = "text/csv; charset=utf-8; header=present"

    /// `token` as the export shows it: as the delivery history does (`DeliveryRecord.redacted`).
    public static func redacted(_ token: DeviceToken) -> String { DeliveryRecord.redacted(token) }

    /// The outcome column (the names of a job's counts) and the reason column (the provider's reason of a rejected
    /// or failed push; empty otherwise), as the history and the event stream name them.
    public static func outcome(_ o: DeliveryOutcome) -> (outcome: String, reason: String) {
        (DeliveryRecord.outcomeName(o), DeliveryRecord.reason(o) ?? "")
    }

    /// Appends `field`, quoted when RFC 4180 §2 requires it.
    public static func appendField(_ field: String, to out: inout [UInt8]) {
        let needsQuotes = field.utf8.contains {
            $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 13 || $0 == 10
        }
        guard needsQuotes else {
            out.append(contentsOf: field.utf8)
            return
        }
        out.append(UInt8(ascii: "\""))
        for b in field.utf8 {
            if b == UInt8(ascii: "\"") { out.append(b) }
            out.append(b)
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends one row, CRLF-terminated.
    public static func appendRow(_ row: OutcomeExportRow, to out: inout [UInt8]) {
        let (outcome, reason) = Self.outcome(row.outcome)
        let fields = [row.platform.rawValue, redacted(row.token), row.user?.rawValue ?? "", outcome, reason]
        for (i, f) in fields.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            appendField(f, to: &out)
        }
        out.append(13)
        out.append(10)
    }

    /// A page of rows as one chunk of the body.
    public static func rows(_ rows: [OutcomeExportRow]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(rows.count * 64)
        for r in rows { appendRow(r, to: &out) }
        return out
    }

    /// Writes the whole export of `job` of `org`: the header, then the ledger of the job and, for a campaign split
    /// into shards, those of its shards, each read a page at a time and handed to `write` as it comes (never the
    /// whole export in memory). Users are looked up in `app`'s registry when it is given.
    public static func export(
        org: OrgID, job: JobID, app: AppName?, from history: any JobHistoryReader,
        write: ([UInt8]) async throws -> Void
    ) async throws {
        try await write(header)
        for ledger in try await history.outcomeLedgers(org: org, job: job) {
            var position = OutcomeExportPosition.start
            while true {
                let page = try await history.outcomes(org: org, ledger: ledger, app: app, from: position)
                if !page.rows.isEmpty { try await write(rows(page.rows)) }
                guard let next = page.next else { break }
                position = next
            }
        }
    }
}
