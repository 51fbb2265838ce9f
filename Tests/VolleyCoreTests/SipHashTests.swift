import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Suite(.tags(.unit)) struct SipHashTests {
    /// Reference vectors of SipHash-2-4 with 128-bit output (key 00…0f, message 00…(n-1)).
    @Test func sipHash128ReferenceVectors() {
        let key = (0..<16).map { UInt8($0) }.withUnsafeBytes { SipHashKey($0) }
        func hex(_ n: Int) -> String {
            var out = [UInt8](repeating: 0, count: 16)
            (0..<n).map { UInt8($0) }.withUnsafeBytes { m in
                out.withUnsafeMutableBytes { SipHash128.hash(m, key: key, into: $0) }
            }
            return out.map { String(format: "%02x", $0) }.joined()
        }
        #expect(hex(0) == "a3817f04ba25a8e66df67214c7550293")
        #expect(hex(15) == "5493e99933b0a8117e08ec0f97cfc3d9")
        #expect(hex(63) == "5150d1772f50834a503e069a973fbd7c")
    }
}
