import Atomics
import Foundation
import NIOCore
import NIOPosix

/// Swift Concurrency's global executor for `volley api`: the jobs of tasks run on NIO's event loops (the singleton
/// group), each on the loop that enqueued it when that is one of them, as they do under NIO's
/// `NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()`.
///
/// The difference is what a job is told it runs on. NIO runs a job with the loop as its serial executor, and then
/// every call into a nonisolated `async` function (which asks for the generic executor) differs from it: the runtime
/// cannot switch in place from a custom executor, so it enqueues the task on the loop again and runs the rest of the
/// call in a later pass. A request crosses many such calls (middleware, router, handler, body, store, Redis): in a
/// profile of a job POST under load, `swift_task_switch` and the queueing under it were 14 % of the API's CPU, and
/// 2 % with this executor. Here a job runs on the global concurrent executor as a task executor, which the runtime
/// (Swift 6.2 and later) takes to be the generic executor that a nonisolated function asks for, so those calls go
/// straight on. Nothing else changes: the thread is the loop's, `inEventLoop` holds, and the Redis connection of that
/// loop answers without a hop.
enum EventLoopGlobalExecutor {
    /// `swift_task_enqueueGlobal_hook`'s type: the job and the runtime's own enqueue.
    private typealias EnqueueGlobalHook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void

    /// Installs the hook; false when it cannot (the hook is already installed, or another one is in place: the slot
    /// is taken only when it is empty), and then tasks stay where they were.
    static func install() -> Bool {
        #if os(Linux)
            guard
                let slot = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook")?
                    .assumingMemoryBound(to: UnsafeAtomic<UnsafeRawPointer?>.Storage.self)
            else { return false }
            let atomic = UnsafeAtomic<UnsafeRawPointer?>(at: slot)
            return withUnsafeTemporaryAllocation(of: EnqueueGlobalHook.self, capacity: 1) { hook -> Bool in
                hook.baseAddress!.initialize(to: { job, _ in
                    // `any()` is the calling loop when the caller is on one of the group's loops.
                    let loop = MultiThreadedEventLoopGroup.singleton.any()
                    loop.execute { job.runSynchronously(on: EventLoopGlobalExecutor.generic) }
                })
                return hook.baseAddress!.withMemoryRebound(to: UnsafeRawPointer.self, capacity: 1) { pointer in
                    atomic.compareExchange(expected: nil, desired: pointer.pointee, ordering: .relaxed).exchanged
                }
            }
        #else
            return false
        #endif
    }

    /// The global concurrent executor, as the task executor a job runs on.
    private static let generic = globalConcurrentExecutor.asUnownedTaskExecutor()
}
