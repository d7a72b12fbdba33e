import CEventPoll

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A read buffer per thread, reused by every read on that thread: a socket's input is read into
/// it and copied out at its exact size, so a read needs no `FIONREAD` call first (a system call
/// per input) and allocates only what arrived. It grows to the largest read asked of the thread
/// (`ConnectionOptions.maximumReadSize`, 64 KiB by default) and is freed when the thread ends; only
/// the pages reads have filled are resident. Found through the thread's slot
/// (`tether_thread_slots.h`), read inline.
enum ReadScratch {
    private struct Buffer {
        var base: UnsafeMutableRawPointer
        var capacity: Int
    }

    /// Runs `body` with this thread's buffer of at least `capacity` bytes.
    static func withBuffer<Result>(capacity: Int, _ body: (UnsafeMutableRawBufferPointer) -> Result) -> Result {
        var buffer = tether_thread_slot(Int32(TETHER_THREAD_SLOT_READ_BUFFER)).map {
            $0.assumingMemoryBound(to: Buffer.self)
        }
        if let current = buffer, current.pointee.capacity < capacity {
            current.pointee.base.deallocate()
            current.pointee.base = .allocate(byteCount: capacity, alignment: 16)
            current.pointee.capacity = capacity
        } else if buffer == nil {
            let new = UnsafeMutablePointer<Buffer>.allocate(capacity: 1)
            new.initialize(to: Buffer(base: .allocate(byteCount: capacity, alignment: 16), capacity: capacity))
            tether_thread_slot_set(Int32(TETHER_THREAD_SLOT_READ_BUFFER), new)
            pthread_setspecific(key, new)  // for the destructor at the thread's end
            buffer = new
        }
        let current = buffer!.pointee
        return body(UnsafeMutableRawBufferPointer(start: current.base, count: capacity))
    }

    /// The first `count` bytes of `scratch` as an array of exactly that size: one copy
    /// (`Array(_:)` of a raw buffer takes the generic collection path, a byte at a time; and
    /// `Array(unsafeUninitializedCapacity:)` reaches an unspecialized allocation in the standard
    /// library on Linux, which looks up the array storage's type metadata in the runtime's cache
    /// on every call, while a reservation and an append of typed bytes are specialized here).
    static func bytes(_ scratch: UnsafeMutableRawBufferPointer, count: Int) -> [UInt8] {
        precondition(count <= scratch.count, "more bytes than the buffer holds")
        guard count > 0, let base = scratch.baseAddress else { return [] }
        // The buffer holds only bytes: bound as such (a no-op at run time) for the typed copy.
        let typed = base.bindMemory(to: UInt8.self, capacity: count)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        bytes.append(contentsOf: UnsafeBufferPointer(start: typed, count: count))
        return bytes
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            tether_thread_slot_set(Int32(TETHER_THREAD_SLOT_READ_BUFFER), nil)
            #if canImport(Darwin)
                let buffer = pointer.assumingMemoryBound(to: Buffer.self)
            #else
                guard let buffer = pointer?.assumingMemoryBound(to: Buffer.self) else { return }
            #endif
            buffer.pointee.base.deallocate()
            buffer.deinitialize(count: 1)
            buffer.deallocate()
        }
        return key
    }()
}
