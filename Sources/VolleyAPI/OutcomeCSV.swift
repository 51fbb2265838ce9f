import Foundation
import VolleyCore

/// The CSV form of a job's per-device outcomes (`GET /v1/jobs/{id}/outcomes`): RFC 4180 (CRLF line ends, a field
/// holding a comma, a double quote, CR or LF is quoted and its quotes doubled), UTF-8, one header line.
enum OutcomeCSV {
    /// The header line: the columns in order.
    static let header: [UInt8] = Array("platform,token,user,outcome,reason\r\n".utf8)
    /// The media type of the answer (RFC 4180 §3, RFC 7111's `header` parameter).
    static let contentType = "text/csv; charset=utf-8; header=present"

    /// `token` as the export shows it: as the delivery history does (`DeliveryRecord.redacted`).
    static func redacted(_ token: DeviceToken) -> String { DeliveryRecord.redacted(token) }

    /// The outcome column (the names of a job's counts) and the reason column (the provider's reason of a rejected
    /// or failed push; empty otherwise), as the history and the event stream name them.
    static func outcome(_ o: DeliveryOutcome) -> (outcome: String, reason: String) {
        (DeliveryRecord.outcomeName(o), DeliveryRecord.reason(o) ?? "")
    }

    /// Appends `field`, quoted when RFC 4180 §2 requires it.
    static func appendField(_ field: String, to out: inout [UInt8]) {
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
    static func appendRow(_ row: OutcomeExportRow, to out: inout [UInt8]) {
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
    static func rows(_ rows: [OutcomeExportRow]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(rows.count * 64)
        for r in rows { appendRow(r, to: &out) }
        return out
    }

    // MARK: - content negotiation (RFC 9110 §12.5.1)

    /// Each media range of an `Accept` header and its weight (`q`, 1 when absent; a malformed `q` counts as 0).
    static func mediaRanges(_ accept: String) -> [(range: String, q: Double)] {
        accept.split(separator: ",").compactMap { part in
            let pieces = part.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let range = pieces.first?.lowercased(), !range.isEmpty else { return nil }
            var q = 1.0
            for p in pieces.dropFirst() where p.lowercased().hasPrefix("q=") {
                q = Double(p.dropFirst(2)).flatMap { (0...1).contains($0) ? $0 : nil } ?? 0
            }
            return (range, q)
        }
    }

    /// The weight `accept` gives `type/subtype`: that of the most specific range matching it (`type/subtype`, then
    /// `type/*`, then `*/*`); 0 when none does.
    static func weight(of type: String, _ subtype: String, in ranges: [(range: String, q: Double)]) -> Double {
        for wanted in ["\(type)/\(subtype)", "\(type)/*", "*/*"] {
            let matching = ranges.filter { $0.range == wanted }
            if !matching.isEmpty { return matching.map(\.q).max() ?? 0 }
        }
        return 0
    }

    /// `GET /v1/jobs/{id}`: true when `Accept` names `text/csv` itself with a weight above 0 and at least that of
    /// `application/json` (so `*/*`, a browser's `text/html,…,*/*` and no `Accept` at all keep the JSON status).
    static func prefersCSV(accept: String?) -> Bool {
        guard let accept else { return false }
        let ranges = mediaRanges(accept)
        guard let named = ranges.filter({ $0.range == "text/csv" }).map(\.q).max(), named > 0 else { return false }
        return named >= weight(of: "application", "json", in: ranges)
    }

    /// `GET /v1/jobs/{id}/outcomes`: true when `Accept` is absent or lets `text/csv` through (`text/csv`, `text/*`
    /// or `*/*` with a weight above 0); false answers 406.
    static func acceptsCSV(accept: String?) -> Bool {
        guard let accept else { return true }
        return weight(of: "text", "csv", in: mediaRanges(accept)) > 0
    }
}
