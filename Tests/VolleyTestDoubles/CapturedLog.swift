import Foundation
import Logging

/// What a logger wrote (each message with its merged metadata), kept in memory: to check what a job logged, or to
/// act the moment a client reports something (a Redis client's "connection lost" during a stall).
public final class CapturedLog: @unchecked Sendable {
    private let lock = NSLock()
    private var _lines: [(message: String, metadata: Logger.Metadata)] = []

    public init() {}

    public var lines: [(message: String, metadata: Logger.Metadata)] { lock.withLock { _lines } }
    public func contains(_ text: String) -> Bool { lock.withLock { _lines.contains { $0.message.contains(text) } } }
    func append(_ message: String, _ metadata: Logger.Metadata) { lock.withLock { _lines.append((message, metadata)) } }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            log.append("\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 })
        }
    }

    /// A logger whose every message, at every level, lands here.
    public var logger: Logger { Logger(label: "test") { _ in Handler(log: self) } }
}
