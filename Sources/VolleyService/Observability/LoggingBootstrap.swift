import Foundation
import Logging

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
        var object: [String: String] = [
            "ts": ISO8601DateFormatter().string(from: Date()),
            "level": event.level.rawValue,
            "logger": label,
            "msg": "\(event.message)",
        ]
        for (k, v) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) { object[k] = "\(v)" }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        Self.lock.withLock {
            FileHandle.standardError.write(data)
            FileHandle.standardError.write(Data([0x0A]))
        }
    }
}
