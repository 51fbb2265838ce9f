import Testing
import VolleyTestTags

@testable import VolleyEngine

/// Chunks are bounded in devices, whatever the devices per user.
@Suite(.tags(.unit)) struct ChunkSizerTests {
    @Test func firstReadIsSmallThenFollowsDevicesPerUser() {
        var s = ChunkSizer()
        #expect(s.usersForNextRead(devicesWanted: 500, cap: 500) == 16)
        s.read(users: 16, devices: 3_200) // 200 devices per user
        #expect(s.usersForNextRead(devicesWanted: 500, cap: 500) == 2)
        var one = ChunkSizer()
        one.read(users: 16, devices: 16) // one device per user: the cap decides
        #expect(one.usersForNextRead(devicesWanted: 500, cap: 500) == 500)
        #expect(one.usersForNextRead(devicesWanted: 500, cap: 100) == 100)
        var none = ChunkSizer()
        none.read(users: 16, devices: 0) // users without devices count as one
        #expect(none.usersForNextRead(devicesWanted: 300, cap: 500) == 300)
        var huge = ChunkSizer()
        huge.read(users: 1, devices: 10_000) // never below one user
        #expect(huge.usersForNextRead(devicesWanted: 500, cap: 500) == 1)
        #expect(ChunkSizer().usersForNextRead(devicesWanted: 0, cap: 0) == 1)
    }
}
