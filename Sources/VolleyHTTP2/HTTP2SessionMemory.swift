internal import CNGHTTP2
import Glibc

/// nghttp2's memory for one session (`nghttp2_mem`), served from per-size free lists.
///
/// nghttp2 allocates for every stream — the stream, its outbound items, a copy of the request's header fields, HPACK
/// buffers — about six `malloc`/`free` pairs per request on the client and four on the server: 58 % and 43 % of all
/// the calls (`perf probe` on libc's malloc with DWARF call chains, `bench transport`). A session lives on one serial
/// queue, but that queue runs on whichever Dispatch worker thread is free, so glibc's per-thread caches miss and the
/// frees land in the shared bins (`_int_malloc`, `unlink_chunk` and `malloc_consolidate` in worker profiles). Here a
/// block goes back on its size's list and the next request of that size takes it: no lock, no search.
///
/// Only the session's queue calls these functions (nghttp2 calls them from inside session calls), so the lists need
/// no lock. Freed blocks are kept up to `cacheLimitBytes` per session; beyond that, and for requests over 4 KiB,
/// blocks go straight to libc. Everything cached is returned in `deinit`, which must run after `nghttp2_session_del`.
final class HTTP2SessionMemory {
    /// Block sizes (payload bytes): 32, 64, then 1.5 × and 2 × each power of two up to 4096 — 14 classes.
    static let classCount = 14
    static let largest = 4096
    /// Bytes of freed blocks a session keeps for reuse (about 1,000 streams' worth).
    static let cacheLimitBytes = 2 * 1024 * 1024
    /// In front of every block: its size class (or -1: straight from libc) and its capacity. 16 bytes keep the
    /// payload 16-aligned, as malloc's is.
    static let headerBytes = 16

    struct Lists {
        var heads: UnsafeMutablePointer<UnsafeMutableRawPointer?>
        var cachedBytes = 0
    }

    private let lists: UnsafeMutablePointer<Lists>

    init() {
        let heads = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: Self.classCount)
        heads.initialize(repeating: nil, count: Self.classCount)
        lists = .allocate(capacity: 1)
        lists.initialize(to: Lists(heads: heads))
    }

    deinit {
        for i in 0..<Self.classCount {
            var p = lists.pointee.heads[i]
            while let block = p {
                p = block.load(fromByteOffset: Self.headerBytes, as: UnsafeMutableRawPointer?.self)
                Glibc.free(block)
            }
        }
        lists.pointee.heads.deallocate()
        lists.deallocate()
    }

    /// The functions to pass to `nghttp2_session_*_new3` (nghttp2 copies the struct).
    var mem: nghttp2_mem {
        nghttp2_mem(
            mem_user_data: UnsafeMutableRawPointer(lists),
            malloc: { size, ud in HTTP2SessionMemory.allocate(size, ud) },
            free: { ptr, ud in HTTP2SessionMemory.release(ptr, ud) },
            calloc: { count, size, ud in
                let (total, overflow) = count.multipliedReportingOverflow(by: size)
                if overflow { return nil }
                guard let p = HTTP2SessionMemory.allocate(total, ud) else { return nil }
                memset(p, 0, total)
                return p
            },
            realloc: { ptr, size, ud in HTTP2SessionMemory.reallocate(ptr, size, ud) })
    }

    /// The payload bytes of class `c`: 32, 64, 96, 128, 192, 256, …, 3072, 4096.
    @inline(__always) static func classSize(_ c: Int) -> Int {
        if c < 2 { return 32 << c }
        let k = 7 + (c - 2) / 2
        return c & 1 == 0 ? 3 << (k - 2) : 1 << k
    }

    /// The smallest class holding `n` bytes (n ≤ 4096).
    @inline(__always) static func sizeClass(_ n: Int) -> Int {
        if n <= 64 { return n <= 32 ? 0 : 1 }
        let k = Int.bitWidth - (n - 1).leadingZeroBitCount // 2^(k-1) < n ≤ 2^k, k ≥ 7
        return 2 + 2 * (k - 7) + (n <= 3 << (k - 2) ? 0 : 1)
    }

    @inline(__always) static func allocate(_ size: Int, _ ud: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
        guard let ud else { return nil }
        let lists = ud.assumingMemoryBound(to: Lists.self)
        let block: UnsafeMutableRawPointer
        if size > largest {
            guard let b = Glibc.malloc(size + headerBytes) else { return nil }
            block = b
            block.storeBytes(of: -1, as: Int.self)
            block.storeBytes(of: size, toByteOffset: 8, as: Int.self)
        } else {
            let c = sizeClass(size)
            if let b = lists.pointee.heads[c] {
                lists.pointee.heads[c] = b.load(fromByteOffset: headerBytes, as: UnsafeMutableRawPointer?.self)
                lists.pointee.cachedBytes -= classSize(c)
                block = b
            } else {
                guard let b = Glibc.malloc(classSize(c) + headerBytes) else { return nil }
                block = b
                block.storeBytes(of: c, as: Int.self)
                block.storeBytes(of: classSize(c), toByteOffset: 8, as: Int.self)
            }
        }
        return block + headerBytes
    }

    @inline(__always) static func release(_ ptr: UnsafeMutableRawPointer?, _ ud: UnsafeMutableRawPointer?) {
        guard let ptr, let ud else { return }
        let lists = ud.assumingMemoryBound(to: Lists.self)
        let block = ptr - headerBytes
        let c = block.load(as: Int.self)
        if c < 0 || lists.pointee.cachedBytes + classSize(c) > cacheLimitBytes {
            Glibc.free(block)
            return
        }
        ptr.storeBytes(of: lists.pointee.heads[c], as: UnsafeMutableRawPointer?.self)
        lists.pointee.heads[c] = block
        lists.pointee.cachedBytes += classSize(c)
    }

    static func reallocate(_ ptr: UnsafeMutableRawPointer?, _ size: Int, _ ud: UnsafeMutableRawPointer?)
        -> UnsafeMutableRawPointer?
    {
        guard let ptr else { return allocate(size, ud) }
        let capacity = (ptr - headerBytes).load(fromByteOffset: 8, as: Int.self)
        if size <= capacity && size > 0 { return ptr }
        if size == 0 {
            release(ptr, ud)
            return nil
        }
        guard let fresh = allocate(size, ud) else { return nil }
        fresh.copyMemory(from: ptr, byteCount: min(capacity, size))
        release(ptr, ud)
        return fresh
    }
}
