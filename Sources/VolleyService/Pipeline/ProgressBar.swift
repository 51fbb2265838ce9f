import Foundation

/// A one-line progress bar for long CLI commands (`devices import`, `directory import`), redrawn in place on
/// standard error, and only when standard error is a terminal: logs and pipes get the final summary alone.
public struct ProgressBar {
    public let unit: String
    /// What 100 % is; may grow while the work runs (devices resolved so far).
    public var total: Int?
    public let enabled: Bool
    let started: Date
    let minInterval: TimeInterval
    private var lastDraw = Date.distantPast

    /// `total`: what 100 % is (nil: counts and rate only).
    public init(
        unit: String, total: Int?, enabled: Bool = isatty(STDERR_FILENO) == 1, minInterval: TimeInterval = 0.2
    ) {
        self.unit = unit
        self.total = total
        self.enabled = enabled
        self.minInterval = minInterval
        started = Date()
    }

    /// Redraws at most every `minInterval`.
    public mutating func update(done: Int, detail: String = "") {
        guard enabled, Date().timeIntervalSince(lastDraw) >= minInterval else { return }
        lastDraw = Date()
        draw(done: done, detail: detail)
    }

    /// Draws the last state and ends the line.
    public func finish(done: Int, detail: String = "") {
        guard enabled else { return }
        draw(done: done, detail: detail)
        FileHandle.standardError.write(Data("\n".utf8))
    }

    private func draw(done: Int, detail: String) {
        let rate = Double(done) / max(0.001, Date().timeIntervalSince(started))
        // Carriage return, the line, then clear to the end of the line (the previous one may have been longer).
        let text = Self.line(done: done, total: total, unit: unit, rate: rate, detail: detail)
        FileHandle.standardError.write(Data("\r\(text)\u{1B}[K".utf8))
    }

    /// `[########------------]  40% 4000/10000 devices  2500/s  (3 invalid)`; without a total, no bar.
    public static func line(
        done: Int, total: Int?, unit: String, rate: Double, detail: String = "", width: Int = 24
    ) -> String {
        var s = ""
        if let total, total > 0 {
            let fraction = min(1, max(0, Double(done) / Double(total)))
            let filled = Int((fraction * Double(width)).rounded(.down))
            s = "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] "
            s += String(format: "%3d%% ", Int((fraction * 100).rounded(.down)))
            s += "\(done)/\(total) \(unit)"
        } else {
            s = "\(done) \(unit)"
        }
        s += String(format: "  %.0f/s", rate)
        if !detail.isEmpty { s += "  (\(detail))" }
        return s
    }

    /// Lines in a file (newline bytes, plus a last line without one), read in 1 MiB blocks; nil when unreadable.
    public static func countLines(path: String) -> Int? {
        guard let h = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? h.close() }
        var lines = 0
        var last: UInt8 = 10
        while let block = try? h.read(upToCount: 1 << 20), !block.isEmpty {
            for b in block where b == 10 { lines += 1 }
            last = block.last ?? last
        }
        return lines + (last == 10 ? 0 : 1)
    }
}
