import CNGHTTP2
import Testing
import VolleyTestTags

@testable import VolleyHTTP2

/// The per-session allocator nghttp2 runs on (the client/server tests drive it under real traffic; these check
/// its contract directly).
@Suite("nghttp2 session memory", .tags(.unit))
struct HTTP2SessionMemoryTests {
    @Test func everySizeGetsTheSmallestClassThatHoldsIt() {
        #expect(
            (0..<HTTP2SessionMemory.classCount).map(HTTP2SessionMemory.classSize)
                == [32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096])
        for n in 1...HTTP2SessionMemory.largest {
            let c = HTTP2SessionMemory.sizeClass(n)
            #expect(c >= 0 && c < HTTP2SessionMemory.classCount && HTTP2SessionMemory.classSize(c) >= n, "\(n)")
            if c > 0 { #expect(HTTP2SessionMemory.classSize(c - 1) < n, "\(n)") }
        }
    }

    @Test func blocksAreReusedReallocKeepsContentCallocZeroes() throws {
        let memory = HTTP2SessionMemory()
        let mem = memory.mem
        let ud = mem.mem_user_data
        let malloc = try #require(mem.malloc)
        let free = try #require(mem.free)
        let calloc = try #require(mem.calloc)
        let realloc = try #require(mem.realloc)

        // A freed block is handed out again for a request of its class, and is 16-aligned.
        let a = try #require(malloc(100, ud))
        #expect(Int(bitPattern: a) % 16 == 0)
        free(a, ud)
        let b = try #require(malloc(120, ud))
        #expect(a == b)
        // Two live blocks never overlap.
        let c = try #require(malloc(120, ud))
        #expect(c != b)

        // realloc keeps the bytes, in place while the class holds the new size, moved beyond it.
        for i in 0..<100 { b.storeBytes(of: UInt8(i), toByteOffset: i, as: UInt8.self) }
        #expect(realloc(b, 128, ud) == b)
        let moved = try #require(realloc(b, 5000, ud))
        #expect((0..<100).allSatisfy { moved.load(fromByteOffset: $0, as: UInt8.self) == UInt8($0) })
        let back = try #require(realloc(moved, 64, ud))
        #expect((0..<64).allSatisfy { back.load(fromByteOffset: $0, as: UInt8.self) == UInt8($0) })

        // calloc zeroes a reused (dirty) block and refuses an overflowing size.
        let dirty = try #require(malloc(300, ud))
        dirty.initializeMemory(as: UInt8.self, repeating: 0xAB, count: 300)
        free(dirty, ud)
        let zeroed = try #require(calloc(30, 10, ud))
        #expect(zeroed == dirty)
        #expect((0..<300).allSatisfy { zeroed.load(fromByteOffset: $0, as: UInt8.self) == 0 })
        #expect(calloc(Int.max, 2, ud) == nil)

        // Large blocks come from libc and go back to it.
        let large = try #require(malloc(64 * 1024, ud))
        large.initializeMemory(as: UInt8.self, repeating: 1, count: 64 * 1024)
        free(large, ud)
        free(nil, ud)
        for p in [c, back, zeroed] { free(p, ud) }
    }

    @Test func cachedBytesStayUnderTheLimit() throws {
        let memory = HTTP2SessionMemory()
        let mem = memory.mem
        let ud = mem.mem_user_data
        let malloc = try #require(mem.malloc)
        let free = try #require(mem.free)
        let blocks = (0..<3000).compactMap { _ in malloc(4096, ud) }
        #expect(blocks.count == 3000)
        for p in blocks { free(p, ud) }
        let cached = try #require(ud).assumingMemoryBound(to: HTTP2SessionMemory.Lists.self).pointee.cachedBytes
        #expect(cached <= HTTP2SessionMemory.cacheLimitBytes && cached > HTTP2SessionMemory.cacheLimitBytes - 4096)
    }
}
