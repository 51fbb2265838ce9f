import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Test(.tags(.unit)) func hexIsLowerCaseTwoDigitsPerByte() {
    #expect(([0x00, 0x0F, 0xA5, 0xFF] as [UInt8]).lowercaseHex == "000fa5ff")
    #expect(([] as [UInt8]).lowercaseHex == "")
    // The same digits `String(format: "%02x")` prints, for every byte value.
    let all = (0...255).map { UInt8($0) }
    #expect(all.lowercaseHex == all.map { String(format: "%02x", $0) }.joined())
}

@Test(.tags(.unit)) func hexReadsBackInEitherCase() {
    let all = (0...255).map { UInt8($0) }
    #expect([UInt8](hex: all.lowercaseHex) == all)
    #expect([UInt8](hex: "00FFa5") == [0x00, 0xFF, 0xA5])
    #expect([UInt8](hex: "") == [])
    #expect([UInt8](hex: "abc") == nil)
    #expect([UInt8](hex: "zz") == nil)
}
