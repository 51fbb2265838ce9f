import Foundation

/// JSON form of reports on the report stream and in the API (RFC 3339 times, sorted keys).
public enum ReportCoding {
    /// RFC 3339 in UTC with milliseconds (report durations are often under a second).
    public static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = RFC3339.encodingStrategy(.milliseconds)
        e.outputFormatting = [.sortedKeys]
        return e
    }()
    public static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = RFC3339.decodingStrategy
        return d
    }()
}
