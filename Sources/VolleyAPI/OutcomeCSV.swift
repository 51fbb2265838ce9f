import Foundation
import VolleyCore

/// Content negotiation of the outcomes' CSV form (RFC 9110 §12.5.1).
extension OutcomeCSV {
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
