import NIOCore

/// Holds a connection's flush until the event loop has run the tasks queued before it, so the answers that the
/// requests' tasks write in one pass of the loop leave together, at its end, rather than one by one between them.
///
/// Nothing is written later than that pass, and no write is lost: a close, or the handler's removal, flushes first.
/// On a busy loop the answers of many connections then go out in one burst, and a client that reads several of them
/// (or a proxy beside the API) is woken once for them instead of once each.
final class LoopPassFlushHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    private var pending = false
    private var removed = false

    func flush(context: ChannelHandlerContext) {
        guard !pending else { return }
        pending = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            handler.flushNow(context)
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        flushNow(context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        flushNow(context)
        removed = true
    }

    private func flushNow(_ context: ChannelHandlerContext) {
        guard pending, !removed else { return }
        pending = false
        context.flush()
    }
}
