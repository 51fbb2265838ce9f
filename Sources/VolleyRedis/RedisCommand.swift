import NIOCore

/// One Redis command in its wire form (a RESP array of bulk strings), built argument by argument.
///
/// Commands with an argument per device (the outcome ledger's HMGET and HSET) are built straight into bytes: no
/// `[String]` of arguments, no String per composite argument (`ios:<token>`), and hiredis appends the bytes as they
/// are instead of formatting them again.
public struct RedisCommand: Sendable {
    /// The arguments, each as `$<length>\r\n<bytes>\r\n`; the array header is added when the command is written.
    private(set) var body: [UInt8] = []
    /// Number of arguments so far.
    public private(set) var count = 0

    public init() {}

    /// A command from its arguments, e.g. `["HGET", key, field]`.
    public init(_ args: [String]) {
        var bytes = 0
        for a in args { bytes += a.utf8.count + 16 }
        body.reserveCapacity(bytes)
        for a in args { append(a) }
    }

    /// Reserves room for `bytes` more bytes of arguments (lengths and separators included).
    public mutating func reserveCapacity(_ bytes: Int) { body.reserveCapacity(body.count + bytes) }

    public mutating func append(_ argument: String) {
        var s = argument
        s.withUTF8 { appendArgument($0, nil, nil) }
    }

    /// Appends one argument made of raw bytes (a blob built beforehand, e.g. a batch of ledger entries).
    public mutating func append(bytes argument: UnsafeBufferPointer<UInt8>) {
        appendArgument(argument, nil, nil)
    }

    /// Appends one argument made of `first`, the byte `separator` and `second` (e.g. `ios:<token>`), without
    /// building it as a String.
    public mutating func append(_ first: String, _ separator: UInt8, _ second: String) {
        var a = first
        var b = second
        a.withUTF8 { pa in b.withUTF8 { pb in appendArgument(pa, separator, pb) } }
    }

    /// `$<length>\r\n`, `first`, then (when given) `separator` and `second`, then `\r\n`.
    private mutating func appendArgument(
        _ first: UnsafeBufferPointer<UInt8>, _ separator: UInt8?,
        _ second: UnsafeBufferPointer<UInt8>?
    ) {
        count += 1
        let length = first.count + (separator == nil ? 0 : 1) + (second?.count ?? 0)
        body.append(UInt8(ascii: "$"))
        RedisCommand.decimal(length) { body.append(contentsOf: $0) }
        body.append(13)
        body.append(10)
        body.append(contentsOf: first)
        if let separator { body.append(separator) }
        if let second { body.append(contentsOf: second) }
        body.append(13)
        body.append(10)
    }

    /// The ASCII digits of a non-negative `value`.
    public static func decimal(_ value: Int, _ use: (UnsafeBufferPointer<UInt8>) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var v = max(0, value)
            var at = 20
            repeat {
                at -= 1
                digits[at] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
            } while v > 0
            use(UnsafeBufferPointer(rebasing: digits[at..<20]))
        }
    }

    /// The whole command as sent: `*<count>\r\n` and the arguments.
    public func withWireBytes<R>(into scratch: inout [UInt8], _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        scratch.removeAll(keepingCapacity: true)
        scratch.reserveCapacity(self.body.count + 24)
        appendWireBytes(to: &scratch)
        return scratch.withUnsafeBufferPointer(body)
    }

    /// Appends the whole command as sent to `bytes`.
    public func appendWireBytes(to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "*"))
        RedisCommand.decimal(count) { bytes.append(contentsOf: $0) }
        bytes.append(13)
        bytes.append(10)
        bytes.append(contentsOf: body)
    }

    /// Appends the whole command as sent to `buffer`.
    public func writeWireBytes(into buffer: inout ByteBuffer) {
        buffer.reserveCapacity(minimumWritableBytes: body.count + 24)
        buffer.writeInteger(UInt8(ascii: "*"))
        RedisCommand.decimal(count) { buffer.writeBytes($0) }
        buffer.writeInteger(UInt16(0x0D0A))
        buffer.writeBytes(body)
    }

    /// The wire form as a new array (tests, diagnostics).
    public var wireBytes: [UInt8] {
        var scratch: [UInt8] = []
        return withWireBytes(into: &scratch) { Array($0) }
    }
}
