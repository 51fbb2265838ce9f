/// Header fields already encoded as bytes, ready to hand to nghttp2 without any String work.
///
/// Layout: one contiguous `[UInt8]`; each field is `flags (1) · name length (4, LE) · value length (4, LE) ·
/// name · value`. One allocation holds any number of fields, copying a block shares its storage (CoW), and the
/// transport points `nghttp2_nv` entries straight into it. Names must be lower case (RFC 9113 §8.2.1): the
/// `StaticString` appends trust the caller, the `String` appends lower-case when needed.
///
/// Use it to encode constant fields once (per app, job or connection) and to build the few per-request fields
/// (`:path`, `authorization`, `apns-id`) into one small buffer per request. Nothing here touches C.
public struct HTTP2HeaderBlock: Sendable, Hashable {
    /// The encoded fields (internal layout; read it through `forEach` / `headers`).
var storage: [UInt8]
    /// Number of fields.
    public private(set) var count: Int

static let fieldOverhead = 9
static let sensitiveFlag: UInt8 = 1

    public init() { storage = []; count = 0 }

    /// An empty block with room for `bytes` of names and values over `fields` fields.
    public init(reservingBytes bytes: Int, fields: Int) {
        storage = []
        storage.reserveCapacity(bytes + fields * Self.fieldOverhead)
        count = 0
    }

    /// Encodes `headers` in order (names lower-cased when needed).
    public init(_ headers: [HTTP2Header]) {
        var bytes = 0
        for h in headers { bytes += h.name.utf8.count + h.value.utf8.count }
        self.init(reservingBytes: bytes, fields: headers.count)
        for h in headers { append(name: h.name, value: h.value, sensitive: h.sensitive) }
    }

    public var isEmpty: Bool { count == 0 }

    /// Bytes a field with this name and value length adds (for `init(reservingBytes:fields:)`).
    public static func encodedSize(nameLength: Int, valueLength: Int) -> Int {
        fieldOverhead + nameLength + valueLength
    }

    /// Makes room for `bytes` more encoded bytes (see `encodedSize`).
    public mutating func reserveCapacity(_ bytes: Int) { storage.reserveCapacity(storage.count + bytes) }

    // MARK: appending

    mutating func appendPrefix(nameLength: Int, valueLength: Int, sensitive: Bool) {
        precondition(nameLength <= Int(UInt32.max) && valueLength <= Int(UInt32.max), "header field too large")
        // Flag byte and the two little-endian lengths, written into one 9-byte stack buffer and appended at once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.fieldOverhead) { out in
            let raw = UnsafeMutableRawBufferPointer(out)
            raw[0] = sensitive ? Self.sensitiveFlag : 0
            raw.storeBytes(of: UInt32(nameLength).littleEndian, toByteOffset: 1, as: UInt32.self)
            raw.storeBytes(of: UInt32(valueLength).littleEndian, toByteOffset: 5, as: UInt32.self)
            storage.append(contentsOf: UnsafeBufferPointer(out))
        }
        count += 1
    }

    /// Appends a field whose name is a lower-case literal. `sensitive` fields are never indexed by HPACK.
    public mutating func append(_ name: StaticString, _ value: String, sensitive: Bool = false) {
        var value = value
        value.withUTF8 { append(name, bytes: $0, sensitive: sensitive) }
    }

    /// Appends a field whose name is a lower-case literal and whose value is raw bytes.
    public mutating func append(_ name: StaticString, bytes value: UnsafeBufferPointer<UInt8>, sensitive: Bool = false) {
        name.withUTF8Buffer { append(nameBytes: $0, valueBytes: value, sensitive: sensitive) }
    }

    /// Appends a field whose value is `prefix` followed by `suffix` (e.g. `:path` = "/3/device/" + token).
    public mutating func append(_ name: StaticString, _ prefix: StaticString, _ suffix: String, sensitive: Bool = false) {
        var suffix = suffix
        suffix.withUTF8 { s in
            name.withUTF8Buffer { n in
                prefix.withUTF8Buffer { p in
                    appendPrefix(nameLength: n.count, valueLength: p.count + s.count, sensitive: sensitive)
                    storage.append(contentsOf: n)
                    storage.append(contentsOf: p)
                }
            }
            storage.append(contentsOf: s)
        }
    }

    /// Appends a field with any name (lower-cased when it holds upper-case letters).
    public mutating func append(name: String, value: String, sensitive: Bool = false) {
        var name = lowercasedHeaderName(name)
        var value = value
        name.withUTF8 { n in value.withUTF8 { append(nameBytes: n, valueBytes: $0, sensitive: sensitive) } }
    }

    /// Appends a field from raw name and value bytes (the name is taken as it is).
    mutating func append(nameBytes: UnsafeBufferPointer<UInt8>, valueBytes: UnsafeBufferPointer<UInt8>, sensitive: Bool = false) {
        appendPrefix(nameLength: nameBytes.count, valueLength: valueBytes.count, sensitive: sensitive)
        storage.append(contentsOf: nameBytes)
        storage.append(contentsOf: valueBytes)
    }

    /// Appends every field of `other`, in order.
    public mutating func append(contentsOf other: HTTP2HeaderBlock) {
        storage.append(contentsOf: other.storage)
        count += other.count
    }

    // MARK: reading

    /// Calls `body` for each field in order with the name and value bytes (valid only during the call).
    func forEach(_ body: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>, Bool) throws -> Void) rethrows {
        try storage.withUnsafeBufferPointer { buf in
            guard let base = buf.baseAddress else { return }
            var at = 0
            for _ in 0..<count {
                let (nameLength, valueLength, sensitive) = Self.prefix(base, at)
                let name = UnsafeBufferPointer(start: base + at + Self.fieldOverhead, count: nameLength)
                let value = UnsafeBufferPointer(start: base + at + Self.fieldOverhead + nameLength, count: valueLength)
                try body(name, value, sensitive)
                at += Self.fieldOverhead + nameLength + valueLength
            }
        }
    }

    @inline(__always) static func prefix(_ base: UnsafePointer<UInt8>, _ at: Int) -> (Int, Int, Bool) {
        @inline(__always) func u32(_ o: Int) -> Int {
            Int(base[o]) | Int(base[o + 1]) << 8 | Int(base[o + 2]) << 16 | Int(base[o + 3]) << 24
        }
        return (u32(at + 1), u32(at + 5), base[at] & sensitiveFlag != 0)
    }

    /// The fields as `HTTP2Header` values (allocates Strings: for tests, logs and rare paths).
    public var headers: [HTTP2Header] {
        var out: [HTTP2Header] = []
        out.reserveCapacity(count)
        forEach { n, v, s in
            out.append(HTTP2Header(String(decoding: n, as: UTF8.self), String(decoding: v, as: UTF8.self), sensitive: s))
        }
        return out
    }

    /// First value of a field; `name` is compared ignoring ASCII case.
    public func value(for name: String) -> String? {
        var name = name
        return name.withUTF8 { wanted -> String? in
            var found: String?
            forEach { n, v, _ in
                guard found == nil, n.count == wanted.count else { return }
                for i in 0..<n.count where asciiLower(n[i]) != asciiLower(wanted[i]) { return }
                found = String(decoding: v, as: UTF8.self)
            }
            return found
        }
    }
}

@inline(__always) func asciiLower(_ b: UInt8) -> UInt8 { b >= 65 && b <= 90 ? b + 32 : b }
