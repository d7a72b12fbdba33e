import Dispatch

#if canImport(CDispatch)
    import CDispatch
#endif

/// A serial queue entered and waited for with `dispatch_sync_f` where its Dispatch object can be
/// had: the Linux overlay's `DispatchQueue.sync` turns its closure into a block copied to the
/// heap, with the captures in a second allocation, on every call (a runner's calls from outside
/// its queue, a read thread's every input). The function form takes a pointer to a context on the
/// caller's stack. Elsewhere (Apple platforms, whose `sync` passes the closure as a block without
/// a copy; another overlay), `queue.sync`.
@_spi(TetherInternal) public struct DirectQueue: @unchecked Sendable {
    // (@unchecked: `object` is a Dispatch object, which Dispatch makes safe to use from any thread.)
    public let queue: DispatchQueue
    /// `queue`'s Dispatch object (`dispatch_queue_t`); nil: `queue.sync`.
    let object: OpaquePointer?

    public init(_ queue: DispatchQueue) {
        self.queue = queue
        object = Self.object(of: queue)
    }

    /// Runs `call.start()` on the queue and returns when it has run.
    public func start(_ call: RunnerCall) {
        #if canImport(CDispatch)
            if let object {
                dispatch_sync_f(object, Unmanaged.passUnretained(call).toOpaque()) { raw in
                    guard let raw = raw else { return }
                    Unmanaged<RunnerCall>.fromOpaque(raw).takeUnretainedValue().start()
                }
                return
            }
        #endif
        queue.sync { call.start() }
    }

    /// Runs `body` on the queue and returns when it has run. `body` is a closure the caller has
    /// already made (its captures already allocated); passing it costs nothing more. (A closure
    /// made just for this call, capturing a variable it sets, has that variable boxed on the
    /// heap: on a path run per input, pass a context as `ReadThreads.handleOnQueue` does.)
    public func sync(_ body: @escaping @Sendable () -> Void) {
        #if canImport(CDispatch)
            if let object {
                var body = body
                withUnsafeMutablePointer(to: &body) { pointer in
                    dispatch_sync_f(object, pointer) { raw in
                        guard let raw = raw else { return }
                        raw.assumingMemoryBound(to: (@Sendable () -> Void).self).pointee()
                    }
                }
                return
            }
        #endif
        queue.sync(execute: body)
    }

    /// `queue`'s Dispatch object, or nil where it cannot be had. The Linux overlay
    /// (swift-corelibs-libdispatch) keeps it in its `DispatchQueue`'s one stored property, which
    /// is internal: it is read through reflection, once per queue, and taken only if Dispatch gives
    /// it the queue's own label. On Apple platforms (where a `DispatchQueue` is the Dispatch
    /// object) and with any other overlay, nil.
    static func object(of queue: DispatchQueue) -> OpaquePointer? {
        #if canImport(CDispatch)
            for child in Mirror(reflecting: queue).children where child.label == "__wrapped" {
                guard let object = child.value as? OpaquePointer,
                    String(cString: dispatch_queue_get_label(object)) == queue.label
                else { return nil }
                return object
            }
        #endif
        return nil
    }
}
