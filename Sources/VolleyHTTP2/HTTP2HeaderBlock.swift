/// Header fields already encoded as bytes, ready to hand to nghttp2 without any String work.
///
/// Layout: one contiguous `[UInt8]`; each field is `flags (1) · name length (4, LE) · value length (4, LE) ·
/// name · value`. One allocation holds any number of fields, copying a block shares its storage (CoW), and the
/// transport points `nghttp2_nv` entries straight into it. Names are stored lower case (RFC 9113 §8.2.1): every
/// append lower-cases a name that holds upper-case ASCII letters.
///
/// Use it to encode constant fields once (per app, job or connection) and to build the few per-request fields
/// (`:path`, `authorization`, `apns-id`) into one small buffer per request. Nothing here touches C.
public struct HTTP2HeaderBlock: Sendable, Hashable {
    /// The encoded fields (internal layout; read it through `forEach` / `headers`).
    var storage: [UInt8]
    /// Number of fields.
    public private(set) var count: Int

    package static let fieldOverhead = 9
    static let sensitiveFlag: UInt8 = 1

    public init() {
        storage = []
        count = 0
    }

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
            Self.storePrefix(
                UnsafeMutableRawPointer(out.baseAddress!), nameLength: nameLength, valueLength: valueLength,
                sensitive: sensitive)
            storage.append(contentsOf: UnsafeBufferPointer(out))
        }
        count += 1
    }

    /// The flag byte and the two little-endian lengths that start every field, written at `p` (9 bytes).
    @inline(__always) static func storePrefix(
        _ p: UnsafeMutableRawPointer, nameLength: Int, valueLength: Int, sensitive: Bool
    ) {
        p.storeBytes(of: sensitive ? sensitiveFlag : 0, as: UInt8.self)
        p.storeBytes(of: UInt32(truncatingIfNeeded: nameLength).littleEndian, toByteOffset: 1, as: UInt32.self)
        p.storeBytes(of: UInt32(truncatingIfNeeded: valueLength).littleEndian, toByteOffset: 5, as: UInt32.self)
    }

    /// Writes one whole field at `p`, which must have room for `encodedSize(nameLength:valueLength:)` bytes (for
    /// buffers that collect fields outside a block, like the server's per-connection header scratch).
    package static func encode(
        name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>,
        at p: UnsafeMutableRawPointer
    ) {
        storePrefix(p, nameLength: name.count, valueLength: value.count, sensitive: false)
        if let n = name.baseAddress { (p + fieldOverhead).copyMemory(from: n, byteCount: name.count) }
        if let v = value.baseAddress { (p + fieldOverhead + name.count).copyMemory(from: v, byteCount: value.count) }
    }

    /// Appends a field whose name is a lower-case literal. `sensitive` fields are never indexed by HPACK.
    public mutating func append(_ name: StaticString, _ value: String, sensitive: Bool = false) {
        var value = value
        value.withUTF8 { append(name, bytes: $0, sensitive: sensitive) }
    }

    /// Appends a field whose name is a lower-case literal and whose value is raw bytes.
    public mutating func append(_ name: StaticString, bytes value: UnsafeBufferPointer<UInt8>, sensitive: Bool = false)
    {
        name.withUTF8Buffer { append(nameBytes: $0, valueBytes: value, sensitive: sensitive) }
    }

    /// Appends a field whose value is `prefix` followed by `suffix` (e.g. `:path` = "/3/device/" + token).
    public mutating func append(_ name: StaticString, _ prefix: StaticString, _ suffix: String, sensitive: Bool = false)
    {
        var suffix = suffix
        suffix.withUTF8 { s in
            name.withUTF8Buffer { n in
                prefix.withUTF8Buffer { p in
                    appendPrefix(nameLength: n.count, valueLength: p.count + s.count, sensitive: sensitive)
                    appendName(n)
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

    /// Appends a field from raw name and value bytes (upper-case ASCII letters in the name are lower-cased).
    public mutating func append(
        nameBytes: UnsafeBufferPointer<UInt8>, valueBytes: UnsafeBufferPointer<UInt8>, sensitive: Bool = false
    ) {
        appendPrefix(nameLength: nameBytes.count, valueLength: valueBytes.count, sensitive: sensitive)
        appendName(nameBytes)
        storage.append(contentsOf: valueBytes)
    }

    /// Every stored name is lower case, so the client hands names to nghttp2 uncopied (which would lower-case them).
    @inline(__always) private mutating func appendName(_ name: UnsafeBufferPointer<UInt8>) {
        if name.contains(where: { $0 >= 65 && $0 <= 90 }) {
            for b in name { storage.append(asciiLower(b)) }
        } else {
            storage.append(contentsOf: name)
        }
    }

    /// Bytes the encoded fields take (for sizing a block that will hold this one: `reservingBytes`).
    public var encodedByteCount: Int { storage.count }

    /// Appends every field of `other`, in order.
    public mutating func append(contentsOf other: HTTP2HeaderBlock) {
        storage.append(contentsOf: other.storage)
        count += other.count
    }

    /// Appends `fields` fields already encoded in this type's layout (the server's per-connection header scratch).
    package mutating func append(encoded: UnsafeRawBufferPointer, fields: Int) {
        if storage.isEmpty { storage = Array(encoded) } else { storage.append(contentsOf: encoded) }
        count += fields
    }

    /// Replaces every field named `name` (exact bytes) by one with `value`, or removes them when `value` is nil.
    /// A pseudo-header goes after the other pseudo-headers, any other field last. Rebuilds the block (rare paths).
    public mutating func set(_ name: String, _ value: String?) {
        var kept = HTTP2HeaderBlock(reservingBytes: storage.count + (value?.utf8.count ?? 0), fields: count + 1)
        var wanted = name
        let pseudo = name.utf8.first == UInt8(ascii: ":")
        wanted.withUTF8 { w in
            var placed = value == nil
            func place() {
                guard !placed, var v = value else { return }
                v.withUTF8 { kept.append(nameBytes: w, valueBytes: $0) }
                placed = true
            }
            forEach { n, v, sensitive in
                if n.elementsEqual(w) { return }
                if pseudo && n.first != UInt8(ascii: ":") { place() }
                kept.append(nameBytes: n, valueBytes: v, sensitive: sensitive)
            }
            place()
        }
        self = kept
    }

    // MARK: reading

    /// Calls `body` for each field in order with the name and value bytes (valid only during the call).
    func forEach(_ body: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>, Bool) throws -> Void) rethrows {
        try withUnsafeFields { fields in
            for f in fields { try body(f.name, f.value, f.sensitive) }
        }
    }

    /// Calls `body` with a borrowed view of every field (name and value bytes, valid only during the call).
    public func withUnsafeFields<R>(_ body: (UnsafeFields) throws -> R) rethrows -> R {
        try storage.withUnsafeBufferPointer { try body(UnsafeFields(base: $0, count: count)) }
    }

    /// A borrowed view of a block: a sequence of (name, value) byte buffers.
    public struct UnsafeFields: Sequence {
        let base: UnsafeBufferPointer<UInt8>
        let count: Int
        public struct Field {
            public let name: UnsafeBufferPointer<UInt8>
            public let value: UnsafeBufferPointer<UInt8>
            public let sensitive: Bool
        }
        public struct Iterator: IteratorProtocol {
            let base: UnsafeBufferPointer<UInt8>
            var left: Int
            var at = 0
            public mutating func next() -> Field? {
                guard left > 0, let start = base.baseAddress else { return nil }
                left -= 1
                let (nameLength, valueLength, sensitive) = HTTP2HeaderBlock.prefix(start, at)
                let name = start + at + HTTP2HeaderBlock.fieldOverhead
                at += HTTP2HeaderBlock.fieldOverhead + nameLength + valueLength
                return Field(
                    name: UnsafeBufferPointer(start: name, count: nameLength),
                    value: UnsafeBufferPointer(start: name + nameLength, count: valueLength), sensitive: sensitive)
            }
        }
        public func makeIterator() -> Iterator { Iterator(base: base, left: count) }
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
            out.append(
                HTTP2Header(String(decoding: n, as: UTF8.self), String(decoding: v, as: UTF8.self), sensitive: s))
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
