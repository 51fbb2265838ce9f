import Foundation

/// A small SVG line-chart renderer for the benchmark's charts (no dependencies; the files open in any browser and
/// render on GitHub).
public struct SVGLineChart {
    public struct Series {
        public var label: String
        public var points: [(Double, Double)]
        public var dashed: Bool
        public init(label: String, points: [(Double, Double)], dashed: Bool = false) {
            self.label = label
            self.points = points
            self.dashed = dashed
        }
    }

    public var title: String
    public var xLabel: String
    public var yLabel: String
    public var series: [Series]
    public var logX = false
    public var logY = false
    public var width = 760.0
    public var height = 440.0

    public init(title: String, xLabel: String, yLabel: String, series: [Series], logX: Bool = false, logY: Bool = false)
    {
        self.title = title
        self.xLabel = xLabel
        self.yLabel = yLabel
        self.series = series
        self.logX = logX
        self.logY = logY
    }

    static let palette = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22",
    ]

    static func esc(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(
            of: ">", with: "&gt;")
    }

    static func niceTicks(_ lo: Double, _ hi: Double, count: Int = 5) -> [Double] {
        let span = max(hi - lo, 1e-9)
        let raw = span / Double(count)
        let mag = pow(10, floor(log10(raw)))
        let step = [1.0, 2, 2.5, 5, 10].map { $0 * mag }.first { $0 >= raw } ?? raw
        // From the tick at or below `lo` to the first tick at or above `hi`, so the axis covers every point.
        var t = floor(lo / step + 1e-9) * step
        var out: [Double] = [t]
        while t < hi - step * 1e-6 {
            t += step
            out.append(t)
        }
        return out
    }

    static func label(_ v: Double) -> String {
        if v == 0 { return "0" }
        if abs(v) >= 1_000_000 { return String(format: "%gM", v / 1_000_000) }
        if abs(v) >= 1000 { return String(format: "%gk", v / 1000) }
        if abs(v) < 1 { return String(format: "%.2g", v) }
        return String(format: "%g", v)
    }

    public func render() -> String {
        let ml = 80.0
        let mr = 200.0
        let mt = 40.0
        let mb = 55.0
        let pw = width - ml - mr
        let ph = height - mt - mb
        let all = series.flatMap(\.points).filter {
            $0.0.isFinite && $0.1.isFinite && (!logY || $0.1 > 0) && (!logX || $0.0 > 0)
        }
        guard !all.isEmpty else { return "<svg xmlns=\"http://www.w3.org/2000/svg\"/>" }
        func tx(_ v: Double) -> Double { logX ? log10(v) : v }
        func ty(_ v: Double) -> Double { logY ? log10(v) : v }
        var x0 = all.map { tx($0.0) }.min()!
        var x1 = all.map { tx($0.0) }.max()!
        var y0 = logY ? floor(all.map { ty($0.1) }.min()!) : min(0, all.map(\.1).min()!)
        var y1 = logY ? ceil(all.map { ty($0.1) }.max()!) : all.map(\.1).max()! * 1.08
        if x1 == x0 {
            x0 -= 1
            x1 += 1
        }
        if y1 == y0 {
            y0 -= 1
            y1 += 1
        }
        // Extend the linear axes to their last tick, so the top/right grid line is inside the plot.
        if !logY, let top = Self.niceTicks(y0, y1, count: 6).last { y1 = max(y1, top) }
        if !logX, let right = Self.niceTicks(x0, x1, count: 6).last { x1 = max(x1, right) }
        func px(_ v: Double) -> Double { ml + (tx(v) - x0) / (x1 - x0) * pw }
        func py(_ v: Double) -> Double { mt + ph - (ty(v) - y0) / (y1 - y0) * ph }
        var s =
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
            + "font-family=\"sans-serif\" font-size=\"12\">\n"
        s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        s += "<text x=\"\(ml)\" y=\"22\" font-size=\"15\" font-weight=\"bold\">\(Self.esc(title))</text>\n"
        // Axes and grid.
        let xt: [Double] =
            logX
            ? Array(Int(floor(x0))...Int(ceil(x1))).map { pow(10, Double($0)) }.filter {
                tx($0) >= x0 - 1e-9 && tx($0) <= x1 + 1e-9
            }
            : Self.niceTicks(x0, x1, count: 6)
        let xticks =
            logX ? (xt.isEmpty ? [pow(10, x0)] : xt) + Set(all.map(\.0)).sorted().filter { !xt.contains($0) } : xt
        for t in Set(xticks).sorted() {
            let x = px(t)
            s += "<line x1=\"\(x)\" y1=\"\(mt)\" x2=\"\(x)\" y2=\"\(mt + ph)\" stroke=\"#eee\"/>"
            s += "<text x=\"\(x)\" y=\"\(mt + ph + 16)\" text-anchor=\"middle\">\(Self.label(t))</text>\n"
        }
        let yticks: [Double] =
            logY ? Array(Int(y0)...Int(y1)).map { pow(10, Double($0)) } : Self.niceTicks(y0, y1, count: 6)
        for t in yticks {
            let y = py(t)
            s += "<line x1=\"\(ml)\" y1=\"\(y)\" x2=\"\(ml + pw)\" y2=\"\(y)\" stroke=\"#eee\"/>"
            s += "<text x=\"\(ml - 6)\" y=\"\(y + 4)\" text-anchor=\"end\">\(Self.label(t))</text>\n"
        }
        s += "<rect x=\"\(ml)\" y=\"\(mt)\" width=\"\(pw)\" height=\"\(ph)\" fill=\"none\" stroke=\"#333\"/>\n"
        s += "<text x=\"\(ml + pw / 2)\" y=\"\(height - 12)\" text-anchor=\"middle\">\(Self.esc(xLabel))</text>\n"
        s +=
            "<text transform=\"translate(16 \(mt + ph / 2)) rotate(-90)\" "
            + "text-anchor=\"middle\">\(Self.esc(yLabel))</text>\n"
        for (i, ser) in series.enumerated() {
            let color = Self.palette[i % Self.palette.count]
            let pts = ser.points.filter { $0.0.isFinite && $0.1.isFinite && (!logY || $0.1 > 0) && (!logX || $0.0 > 0) }
                .sorted { $0.0 < $1.0 }
            if pts.isEmpty { continue }
            let d = pts.map { String(format: "%.1f,%.1f", px($0.0), py($0.1)) }.joined(separator: " ")
            s +=
                "<polyline fill=\"none\" stroke=\"\(color)\" "
                + "stroke-width=\"2\"\(ser.dashed ? " stroke-dasharray=\"6 4\"" : "") points=\"\(d)\"/>\n"
            if !ser.dashed {
                for p in pts {
                    s += String(
                        format: "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%@\"/>", px(p.0), py(p.1), color)
                }
            }
            let ly = mt + 10 + Double(i) * 18
            s +=
                "<line x1=\"\(ml + pw + 12)\" y1=\"\(ly)\" x2=\"\(ml + pw + 34)\" y2=\"\(ly)\" stroke=\"\(color)\" "
                + "stroke-width=\"2\"\(ser.dashed ? " stroke-dasharray=\"6 4\"" : "")/>"
            s += "<text x=\"\(ml + pw + 40)\" y=\"\(ly + 4)\">\(Self.esc(ser.label))</text>\n"
        }
        s += "</svg>\n"
        return s
    }

    public func write(to path: String) throws {
        try render().write(toFile: path, atomically: true, encoding: .utf8)
    }
}
