import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// `CivilDate`: the integer calendar agrees with Foundation's, both ways, over four centuries either side of 1970.
@Suite(.tags(.unit)) struct CivilDateTests {
    @Test func writesWhatFoundationWritesToTheSecond() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var instants: [Double] = [0, -1, 86_399, 86_400, 951_782_400, 1_795_740_000.999, -2_208_988_800, 4_102_444_800]
        for _ in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            // From 1601 to 2338.
            instants.append(Double(Int64(state >> 30) % 11_644_473_600) * (state & 1 == 0 ? 1 : -1) + 0.25)
        }
        for t in instants {
            let date = Date(timeIntervalSince1970: t)
            #expect(CivilDate.iso8601Seconds(date) == date.ISO8601Format(), "\(t)")
        }
    }

    @Test func daysAndDatesAreInverse() {
        for days in stride(from: -146_097 * 2, through: 146_097 * 2, by: 7) {
            let d = CivilDate.date(days: days)
            #expect(CivilDate.days(year: d.year, month: d.month, day: d.day) == days)
        }
        #expect(CivilDate.date(days: 0) == (1970, 1, 1))
        #expect(CivilDate.date(days: 11_016) == (2000, 2, 29))
        #expect(CivilDate.days(year: 2026, month: 11, day: 27) == 20_784)
    }
}
