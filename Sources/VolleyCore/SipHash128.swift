// SipHash-2-4 with a 128-bit output (Aumasson & Bernstein; the reference implementation's `outlen == 16` mode).
// A keyed PRF over short messages: the per-device half of `apns-id` (keyed once per job) and both halves of a
// message id (`MessageTracking`).

/// A SipHash-2-4 key (two little-endian 64-bit words).
package struct SipHashKey: Sendable, Hashable {
    package let k0: UInt64
    package let k1: UInt64

    /// The first 16 bytes of `bytes` (which must hold at least 16), little-endian.
    package init(_ bytes: UnsafeRawBufferPointer) {
        k0 = bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self).littleEndian
        k1 = bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndian
    }
}

package enum SipHash128 {
    /// The 16-byte digest of `message` under `key`, written to `out` (16 bytes).
    package static func hash(
        _ message: UnsafeRawBufferPointer, key: SipHashKey, into out: UnsafeMutableRawBufferPointer
    ) {
        var v0: UInt64 = 0x736f_6d65_7073_6575 ^ key.k0
        var v1: UInt64 = 0x646f_7261_6e64_6f6d ^ key.k1 ^ 0xee
        var v2: UInt64 = 0x6c79_6765_6e65_7261 ^ key.k0
        var v3: UInt64 = 0x7465_6462_7974_6573 ^ key.k1

        @inline(__always) func round() {
            v0 &+= v1
            v1 = v1.rotatedLeft(13)
            v1 ^= v0
            v0 = v0.rotatedLeft(32)
            v2 &+= v3
            v3 = v3.rotatedLeft(16)
            v3 ^= v2
            v0 &+= v3
            v3 = v3.rotatedLeft(21)
            v3 ^= v0
            v2 &+= v1
            v1 = v1.rotatedLeft(17)
            v1 ^= v2
            v2 = v2.rotatedLeft(32)
        }

        let n = message.count
        let end = n - n % 8
        var i = 0
        while i < end {
            let m = message.loadUnaligned(fromByteOffset: i, as: UInt64.self).littleEndian
            v3 ^= m
            round()
            round()
            v0 ^= m
            i += 8
        }
        var b = UInt64(truncatingIfNeeded: n) << 56
        var shift: UInt64 = 0
        while i < n {
            b |= UInt64(message[i]) << shift
            shift += 8
            i += 1
        }
        v3 ^= b
        round()
        round()
        v0 ^= b

        v2 ^= 0xee
        round()
        round()
        round()
        round()
        out.storeBytes(of: (v0 ^ v1 ^ v2 ^ v3).littleEndian, toByteOffset: 0, as: UInt64.self)
        v1 ^= 0xdd
        round()
        round()
        round()
        round()
        out.storeBytes(of: (v0 ^ v1 ^ v2 ^ v3).littleEndian, toByteOffset: 8, as: UInt64.self)
    }
}

extension UInt64 {
    @inline(__always) fileprivate func rotatedLeft(_ by: UInt64) -> UInt64 { (self << by) | (self >> (64 - by)) }
}
