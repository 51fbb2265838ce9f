import VolleyHTTP2

/// The fields the mock reads, picked out of a request in one pass (last occurrence wins, as before). Views into the
/// request's `HTTP2HeaderBlock`: valid only inside its `withUnsafeFields`.
struct MockRawFields {
    var method: UnsafeBufferPointer<UInt8>?
    var path = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
    var authorization, topic, pushType, priority, expiration, collapseID, apnsID: UnsafeBufferPointer<UInt8>?
    /// How many `authorization` fields the request has (`header(_:)` reads the first, `authorization` is the last).
    var authorizationCount = 0

    init(_ fields: HTTP2HeaderBlock.UnsafeFields) {
        for f in fields {
            let n = f.name
            switch n.count {
            case 5 where MockBytes.equal(n, ":path"): path = f.value
            case 7 where MockBytes.equal(n, ":method"): method = f.value
            case 7 where MockBytes.equal(n, "apns-id"): apnsID = f.value
            case 10 where MockBytes.equal(n, "apns-topic"): topic = f.value
            case 13 where MockBytes.equal(n, "authorization"):
                authorization = f.value
                authorizationCount += 1
            case 13 where MockBytes.equal(n, "apns-priority"): priority = f.value
            case 14 where MockBytes.equal(n, "apns-push-type"): pushType = f.value
            case 15 where MockBytes.equal(n, "apns-expiration"): expiration = f.value
            case 16 where MockBytes.equal(n, "apns-collapse-id"): collapseID = f.value
            default: break
            }
        }
    }
}

/// Byte helpers that answer exactly what the String operations they replace answered.
enum MockBytes {
    @inline(__always) static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: StaticString) -> Bool {
        let n = b.utf8CodeUnitCount
        guard a.count == n else { return false }
        let p = b.utf8Start
        for i in 0..<n where a[i] != p[i] { return false }
        return true
    }

    /// Eight bytes at a time (provider tokens are ~190 bytes and compared per request).
    static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return b.withUnsafeBufferPointer { bb in
            guard let pa = a.baseAddress, let pb = bb.baseAddress else { return false }
            let n = a.count
            var i = 0
            while i + 8 <= n {
                if UnsafeRawPointer(pa + i).loadUnaligned(as: UInt64.self)
                    != UnsafeRawPointer(pb + i).loadUnaligned(as: UInt64.self)
                {
                    return false
                }
                i += 8
            }
            while i < n {
                if pa[i] != pb[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// `String(decoding: a).hasPrefix(prefix)` for an ASCII prefix. Only when a non-ASCII scalar follows the prefix
    /// can the String answer differ (a combining mark joins the prefix's last character); that case decodes.
    static func hasPrefix(_ a: UnsafeBufferPointer<UInt8>, _ prefix: StaticString) -> Bool {
        let n = prefix.utf8CodeUnitCount
        guard a.count >= n else { return false }
        let p = prefix.utf8Start
        for i in 0..<n where a[i] != p[i] { return false }
        if a.count == n || a[n] < 0x80 { return true }
        return String(decoding: a, as: UTF8.self).hasPrefix(prefix.description)
    }

    /// True when `a` holds `word` at offset `at`.
    @inline(__always) static func hasPrefix(_ a: UnsafeBufferPointer<UInt8>, at: Int, _ word: StaticString) -> Bool {
        let n = word.utf8CodeUnitCount
        guard at >= 0, at + n <= a.count else { return false }
        let p = word.utf8Start
        for k in 0..<n where a[at + k] != p[k] { return false }
        return true
    }

    /// Moves `i` past the plain text of a JSON string: bytes 0x20–0x7F other than `"` and `\`. Eight bytes at a
    /// time while a word holds none of the others (the "has a zero byte" test on x − 0x20…, x, x ^ `"`… and
    /// x ^ `\`…, whose first flagged byte is exact), then byte by byte.
    @inline(__always) static func skipPlainText(_ b: UnsafeBufferPointer<UInt8>, from i: inout Int) {
        if let base = b.baseAddress {
            while i + 8 <= b.count {
                let x = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                let q = x ^ (ones &* 0x22)
                let bs = x ^ (ones &* 0x5C)
                let special = (x &- ones &* 0x20) | x | (q &- ones) & ~q | (bs &- ones) & ~bs
                if special & highs != 0 { break }
                i += 8
            }
        }
        while i < b.count {
            let c = b[i]
            guard c >= 0x20, c < 0x80, c != UInt8(ascii: "\""), c != UInt8(ascii: "\\") else { return }
            i += 1
        }
    }

    /// Moves `i` to the next `"` or `\\` of `b` (or its end), eight bytes at a time while a word holds neither.
    @inline(__always) static func skipUnquoted(_ b: UnsafeBufferPointer<UInt8>, from i: inout Int) {
        if let base = b.baseAddress {
            while i + 8 <= b.count {
                let x = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                let q = x ^ (ones &* 0x22)
                let bs = x ^ (ones &* 0x5C)
                if ((q &- ones) & ~q | (bs &- ones) & ~bs) & highs != 0 { break }
                i += 8
            }
        }
        while i < b.count, b[i] != UInt8(ascii: "\""), b[i] != UInt8(ascii: "\\") { i += 1 }
    }

    /// Moves `i` past a JSON number (RFC 8259 §6, as `JSONValue(parsing:)` reads numbers); false when the bytes at
    /// `i` are not one.
    static func skipNumber(_ b: UnsafeBufferPointer<UInt8>, from i: inout Int) -> Bool {
        @inline(__always) func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
        if i < b.count, b[i] == UInt8(ascii: "-") { i += 1 }
        guard i < b.count, isDigit(b[i]) else { return false }
        if b[i] == UInt8(ascii: "0") { i += 1 } else { while i < b.count, isDigit(b[i]) { i += 1 } }
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            guard i < b.count, isDigit(b[i]) else { return false }
            while i < b.count, isDigit(b[i]) { i += 1 }
        }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard i < b.count, isDigit(b[i]) else { return false }
            while i < b.count, isDigit(b[i]) { i += 1 }
        }
        return true
    }

    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Appends `v` in decimal (as `String(v)` writes it).
    static func appendDecimal(_ v: Int64, to out: inout [UInt8]) {
        if v < 0 { out.append(UInt8(ascii: "-")) }
        appendDigits(v.magnitude, radix: 10, to: &out)
    }

    /// Appends `v` in lowercase hexadecimal (as `String(v, radix: 16)` writes it).
    static func appendHex(_ v: UInt64, to out: inout [UInt8]) { appendDigits(v, radix: 16, to: &out) }

    private static func appendDigits(_ v: UInt64, radix: UInt64, to out: inout [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        var buffer: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &buffer) { tmp in
            var n = v
            var k = tmp.count
            repeat {
                k -= 1
                tmp[k] = digits.utf8Start[Int(n % radix)]
                n /= radix
            } while n > 0
            out.append(contentsOf: tmp[k...])
        }
    }

    /// `String(decoding: a).utf8.count` (invalid UTF-8 is repaired with U+FFFD, which changes the count).
    static func decodedCount(_ a: UnsafeBufferPointer<UInt8>) -> Int {
        for c in a where c >= 0x80 { return String(decoding: a, as: UTF8.self).utf8.count }
        return a.count
    }
}
