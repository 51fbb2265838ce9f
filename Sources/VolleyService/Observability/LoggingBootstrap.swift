import Foundation
import Logging
import VolleyCore

/// The one place that bootstraps swift-log (called from `main` only). Text for terminals, JSON lines for
/// log shippers in containers.
public enum LoggingBootstrap {
    public static func bootstrap(_ settings: LogSettings) {
        let level = Logger.Level(rawValue: settings.level) ?? .info
        switch settings.format {
        case .text:
            LoggingSystem.bootstrap { label in
                var h = StreamLogHandler.standardError(label: label)
                h.logLevel = level
                return h
            }
        case .json:
            LoggingSystem.bootstrap { label in
                var h = JSONLogHandler(label: label)
                h.logLevel = level
                return h
            }
        }
    }
}

/// One JSON object per line on stderr: `{"ts","level","logger","msg", …metadata}`.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String
    private static let lock = NSLock()

    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        guard
            let data = Self.line(
                date: Date(), level: event.level, label: label, message: "\(event.message)",
                metadata: metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }))
        else { return }
        Self.lock.withLock {
            FileHandle.standardError.write(data)
            FileHandle.standardError.write(Data([0x0A]))
        }
    }

    /// One log line's JSON object. Nested metadata (the `job done` line's counts per reason) stays nested: an
    /// object or array in the line, not its Swift description in a string.
    public static func line(
        date: Date, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata
    ) -> Data? {
        var object: [String: Any] = [
            "ts": RFC3339.format(date), "level": level.rawValue, "logger": label, "msg": message,
        ]
        for (k, v) in metadata { object[k] = json(v) }
        return try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    static func json(_ v: Logger.Metadata.Value) -> Any {
        switch v {
        case .string(let s): return s
        case .stringConvertible(let c): return "\(c)"
        case .dictionary(let d): return d.mapValues(json)
        case .array(let a): return a.map(json)
        }
    }
}
