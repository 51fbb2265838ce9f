/// A Redis Cluster hash slot (0–16383): `CRC16(key) mod 16384`, where only the hash tag is hashed when the key has
/// one. Redis Cluster specification, "Keys distribution model" and "Hash tags".
public struct RedisClusterSlot: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let count = 16_384
    public let rawValue: Int

    public init?(rawValue: Int) {
        guard (0..<Self.count).contains(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    private init(unchecked rawValue: Int) { self.rawValue = rawValue }

    /// The slot of `key`.
    public init(key: String) {
        var key = key
        self = key.withUTF8 { Self(keyBytes: $0) }
    }

    /// The slot of a key given as bytes.
    public init(keyBytes key: UnsafeBufferPointer<UInt8>) {
        let hashed = Self.hashedPart(key)
        self.init(unchecked: Int(Self.crc16(UnsafeBufferPointer(rebasing: key[hashed])) & 0x3FFF))
    }

    /// The part of the key that is hashed: the bytes between the first `{` and the first `}` after it, when there
    /// is at least one byte between them; otherwise the whole key (`{}` and a `{` without `}` hash everything).
    static func hashedPart(_ key: UnsafeBufferPointer<UInt8>) -> Range<Int> {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return 0..<key.count }
        guard let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1 else {
            return 0..<key.count
        }
        return (open + 1)..<close
    }

    /// `hashedPart` of a key given as a string: its hash tag, or the whole key. Keys that must share a slot with
    /// another carry this part of it in their own `{…}`.
    public static func hashedPart(of key: String) -> Substring {
        var key = key
        let part = key.withUTF8 { hashedPart($0) }
        let utf8 = key.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: part.lowerBound)
        let end = utf8.index(utf8.startIndex, offsetBy: part.upperBound)
        return Substring(utf8[start..<end])
    }

    /// CRC16-CCITT (XModem): polynomial 0x1021, initial value 0, no reflection, no final xor. The specification's
    /// check value: CRC16("123456789") = 0x31C3.
    public static func crc16(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for b in bytes { crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ b)] }
        return crc
    }

    /// CRC16 of a string's UTF-8 bytes.
    public static func crc16(_ string: String) -> UInt16 {
        var s = string
        return s.withUTF8 { crc16($0) }
    }

    private static let table: [UInt16] = (0..<256).map { i in
        var crc = UInt16(i) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { String(rawValue) }
}
