import VolleyCore

/// Reads the registry's device record JSON straight into a `Device` on the send path.
///
/// Every resolved device passes through here: each of a user's records is one value of the `HVALS` on their device
/// hash (`RedisPipelineSession.devices`). Decoding them with Foundation's `JSONDecoder` cost about a quarter of a
/// worker's CPU on a campaign (keyed containers, date decoding, a `Data` copy per record). The registry writes these
/// records itself (`DeviceRecord`, compact JSON, a flat object of strings and numbers), so one pass over the bytes
/// is enough. Anything this reader does not recognise (nesting, arrays, a missing required key, a malformed escape)
/// returns nil, and the session decodes that record with `DeviceRecord.decoder` instead, or skips it with a warning
/// when that fails too: an odd record is read as `DeviceRecord` reads it.
public enum DeviceRecordReader {
    /// The device in `json`, or nil when the record is not a plain flat object this reader accepts.
    public static func device(fromJSON json: String) -> Device? {
        var json = json
        return json.withUTF8 { read($0) }
    }

    /// The device in the record's bytes (as Redis returned them), or nil as for `device(fromJSON:)`.
    public static func device(fromJSONBytes bytes: UnsafeRawBufferPointer) -> Device? {
        read(bytes.assumingMemoryBound(to: UInt8.self))
    }

    /// Required keys as `DeviceRecord`'s decoder requires them: platform, token, user, registeredAt, lastSeenAt. The
    /// optional `rsaPublicKey` and `cipherName` (a device's key for encrypted pushes, usually absent) become
    /// `Device.encryptionKey`, as `DeviceRecord.device` makes it; the optional `timeZone` becomes `Device.timeZone`.
    static func read(_ s: UnsafeBufferPointer<UInt8>) -> Device? {
        var p = Parser(s)
        guard p.consume(UInt8(ascii: "{")) else { return nil }
        var platform: Platform?
        var token: String?
        var environment: APNSEnvironment?
        var locale: String?
        var user: String?
        var rsaPublicKey: String?
        var cipherName: String?
        var timeZone: String?
        var haveRegistered = false
        var haveLastSeen = false
        p.skipSpace()
        if p.consume(UInt8(ascii: "}")) { return nil }
        while true {
            guard let key = p.key() else { return nil }
            guard p.consume(UInt8(ascii: ":")) else { return nil }
            p.skipSpace()
            switch key {
            case .platform:
                guard let v = p.string(), let pl = Platform(rawValue: v) else { return nil }
                platform = pl
            case .token:
                guard let v = p.string() else { return nil }
                token = v
            case .user:
                guard let v = p.string() else { return nil }
                user = v
            case .environment:
                if !p.null() {
                    guard let v = p.string(), let e = APNSEnvironment(rawValue: v) else { return nil }
                    environment = e
                }
            case .locale:
                if !p.null() {
                    guard let v = p.string() else { return nil }
                    locale = v
                }
            case .registeredAt:
                guard p.number() else { return nil }
                haveRegistered = true
            case .lastSeenAt:
                guard p.number() else { return nil }
                haveLastSeen = true
            case .rsaPublicKey:
                if !p.null() {
                    guard let v = p.string() else { return nil }
                    rsaPublicKey = v
                }
            case .cipherName:
                if !p.null() {
                    guard let v = p.string() else { return nil }
                    cipherName = v
                }
            case .timeZone:
                if !p.null() {
                    guard let v = p.string() else { return nil }
                    timeZone = v
                }
            case .other:
                guard p.skipScalar() else { return nil }
            }
            p.skipSpace()
            if p.consume(UInt8(ascii: ",")) {
                p.skipSpace()
                continue
            }
            if p.consume(UInt8(ascii: "}")) { break }
            return nil
        }
        p.skipSpace()
        guard p.atEnd, let platform, let token, let user, haveRegistered, haveLastSeen else { return nil }
        return Device(
            platform: platform, token: DeviceToken(token), environment: environment, locale: locale,
            user: UserID(user),
            encryptionKey: rsaPublicKey.map { DeviceKeyMaterial(rsaPublicKey: $0, cipherName: cipherName) },
            timeZone: timeZone)
    }

    /// The record keys this reader uses, matched from the key's bytes (no String per key).
    enum Key {
        case platform, token, user, environment, locale, registeredAt, lastSeenAt, rsaPublicKey, cipherName, timeZone
        case other

        init(_ k: UnsafeBufferPointer<UInt8>) {
            func equals(_ word: StaticString) -> Bool {
                guard k.count == word.utf8CodeUnitCount else { return false }
                for j in 0..<k.count where k[j] != word.utf8Start[j] { return false }
                return true
            }
            switch k.count {
            case 4: self = equals("user") ? .user : .other
            case 5: self = equals("token") ? .token : .other
            case 6: self = equals("locale") ? .locale : .other
            case 8: self = equals("platform") ? .platform : equals("timeZone") ? .timeZone : .other
            case 10: self = equals("lastSeenAt") ? .lastSeenAt : equals("cipherName") ? .cipherName : .other
            case 11: self = equals("environment") ? .environment : .other
            case 12: self = equals("registeredAt") ? .registeredAt : equals("rsaPublicKey") ? .rsaPublicKey : .other
            default: self = .other
            }
        }
    }

    /// Bounds-checked reading of the record's bytes (valid only inside `withUTF8`).
    struct Parser {
        let b: UnsafeBufferPointer<UInt8>
        var i = 0
        init(_ b: UnsafeBufferPointer<UInt8>) { self.b = b }

        var atEnd: Bool { i >= b.count }

        mutating func skipSpace() {
            while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
        }

        mutating func consume(_ c: UInt8) -> Bool {
            skipSpace()
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }

        mutating func null() -> Bool {
            guard i + 4 <= b.count, b[i] == UInt8(ascii: "n"), b[i + 1] == UInt8(ascii: "u"),
                b[i + 2] == UInt8(ascii: "l"), b[i + 3] == UInt8(ascii: "l")
            else { return false }
            i += 4
            return true
        }

        /// A JSON number, by the grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
        mutating func number() -> Bool {
            func isDigit(_ k: Int) -> Bool { k < b.count && b[k] >= 0x30 && b[k] <= 0x39 }
            var k = i
            if k < b.count, b[k] == UInt8(ascii: "-") { k += 1 }
            guard isDigit(k) else { return false }
            if b[k] == 0x30 { k += 1 } else { while isDigit(k) { k += 1 } }
            if k < b.count, b[k] == UInt8(ascii: ".") {
                k += 1
                guard isDigit(k) else { return false }
                while isDigit(k) { k += 1 }
            }
            if k < b.count, b[k] == UInt8(ascii: "e") || b[k] == UInt8(ascii: "E") {
                k += 1
                if k < b.count, b[k] == UInt8(ascii: "+") || b[k] == UInt8(ascii: "-") { k += 1 }
                guard isDigit(k) else { return false }
                while isDigit(k) { k += 1 }
            }
            i = k
            return true
        }

        /// Skips a value of a key this reader does not use: a string, number, true/false/null. Objects and
        /// arrays are left to the full decoder.
        mutating func skipScalar() -> Bool {
            guard i < b.count else { return false }
            switch b[i] {
            case UInt8(ascii: "\""): return string() != nil
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return null()
            default: return number()
            }
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let n = word.utf8CodeUnitCount
            guard i + n <= b.count else { return false }
            for k in 0..<n where b[i + k] != word.utf8Start[k] { return false }
            i += n
            return true
        }

        /// An object key: plain keys are matched in place, keys with escapes are decoded first.
        mutating func key() -> Key? {
            if let plain = plainString() { return Key(plain) }
            guard var decoded = string() else { return nil }
            return decoded.withUTF8 { Key($0) }
        }

        /// The bytes between the quotes of a string with no escape and no control character, consumed; nil (and
        /// only leading space consumed) for anything else.
        mutating func plainString() -> UnsafeBufferPointer<UInt8>? {
            skipSpace()
            guard i < b.count, b[i] == UInt8(ascii: "\"") else { return nil }
            var k = i + 1
            while k < b.count, b[k] != UInt8(ascii: "\""), b[k] != UInt8(ascii: "\\"), b[k] >= 0x20 { k += 1 }
            guard k < b.count, b[k] == UInt8(ascii: "\"") else { return nil }
            defer { i = k + 1 }
            return UnsafeBufferPointer(rebasing: b[(i + 1)..<k])
        }

        /// A JSON string. Plain strings are one copy; escapes are decoded (`\uXXXX` with surrogate pairs).
        mutating func string() -> String? {
            if let plain = plainString() { return String(decoding: plain, as: UTF8.self) }
            guard i < b.count, b[i] == UInt8(ascii: "\"") else { return nil }
            i += 1
            var out: [UInt8] = []
            while i < b.count {
                let c = b[i]
                if c == UInt8(ascii: "\"") {
                    i += 1
                    return String(decoding: out, as: UTF8.self)
                }
                if c < 0x20 { return nil }
                if c != UInt8(ascii: "\\") {
                    out.append(c)
                    i += 1
                    continue
                }
                do { try JSONEscape.decode(UnsafeRawBufferPointer(b), at: &i, into: &out) } catch { return nil }
            }
            return nil
        }
    }
}
