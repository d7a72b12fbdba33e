import Synchronization

/// The builder that elements made in code (`XElement.init`) are built with, kept between them:
/// its buffers keep their room and its recent names their boxes, so that building an element
/// allocates its tree's storage and little else (a stanza built in code was four buffers, a box
/// per name and the storage; a message and its body, two such trees).
///
/// One for the process, taken and given back with an atomic exchange: a thread that finds it
/// taken (another thread building at the same moment, or an element built while one is) makes a
/// builder of its own, which it keeps only if the slot is empty again when it is done. A builder
/// whose buffers grew past `keptRoom` (a large element built in code) is not kept, so the spare
/// never holds more than a stanza's worth of memory.
@safe final class XMLSpareBuilder {
    var builder = XMLTreeBuilder(nodes: 16, textBytes: 128, names: 8, depth: 8)
    /// Boxes of names met lately, by `slot(of:)`: a name met again is the same box (retained by
    /// each tree that uses it) instead of a new one.
    private var recentNames = [XMLNameBox?](repeating: nil, count: XMLSpareBuilder.recentNameSlots)

    static let recentNameSlots = 64
    /// The most nodes (and names, and open elements), and text bytes, a builder's buffers may
    /// have room for and still be kept.
    static let keptRoom = (nodes: 1024, textBytes: 16 * 1024)

    /// The process's spare (`Unmanaged` bits; zero while taken or not made yet).
    private static let spare = Atomic<UInt>(0)

    /// Runs `body` with the spare builder (or a new one when it is in use).
    static func withBuilder<Result>(_ body: (XMLSpareBuilder) -> Result) -> Result {
        let spare = take()
        defer { giveBack(spare) }
        return body(spare)
    }

    private static func take() -> XMLSpareBuilder {
        let bits = spare.exchange(0, ordering: .acquiring)
        guard bits != 0, let pointer = unsafe UnsafeRawPointer(bitPattern: bits) else { return XMLSpareBuilder() }
        return unsafe Unmanaged<XMLSpareBuilder>.fromOpaque(pointer).takeRetainedValue()
    }

    private static func giveBack(_ builder: XMLSpareBuilder) {
        builder.builder.reset()
        guard builder.builder.nodes.capacity <= keptRoom.nodes, unsafe builder.builder.names.capacity <= keptRoom.nodes,
            builder.builder.open.capacity <= keptRoom.nodes, builder.builder.text.capacity <= keptRoom.textBytes
        else { return }
        let retained = unsafe Unmanaged.passRetained(builder)
        let bits = UInt(bitPattern: unsafe retained.toOpaque())
        if !spare.compareExchange(expected: 0, desired: bits, ordering: .releasing).exchanged {
            unsafe retained.release()
        }
    }

    /// The room the spare's buffers have (nodes, text bytes), nil while it is taken or not made
    /// yet (for the tests).
    static var spareRoom: (nodes: Int, textBytes: Int)? {
        let bits = spare.exchange(0, ordering: .acquiring)
        guard bits != 0, let pointer = unsafe UnsafeRawPointer(bitPattern: bits) else { return nil }
        let builder = unsafe Unmanaged<XMLSpareBuilder>.fromOpaque(pointer).takeRetainedValue()
        defer { giveBack(builder) }
        return (builder.builder.nodes.capacity, builder.builder.text.capacity)
    }

    /// The box for `name`: the recent one when it is the same name (prefix included, which the
    /// serializer writes), else a new one. Two slots per name (`slot(of:)` and its neighbour):
    /// a new box goes into the first and the one there moves to the second, so that two names
    /// that share a slot and alternate (an element and its attribute) both stay.
    func box(for name: XMLName) -> XMLNameBox {
        let first = Self.slot(of: name)
        let second = first ^ 1
        if let recent = recentNames[first], Self.isSame(recent.name, name) { return recent }
        if let recent = recentNames[second], Self.isSame(recent.name, name) { return recent }
        let box = XMLNameBox(name)
        recentNames[second] = recentNames[first]
        recentNames[first] = box
        return box
    }

    private static func isSame(_ recent: XMLName, _ name: XMLName) -> Bool {
        recent.local == name.local && recent.namespace == name.namespace && recent.prefix == name.prefix
    }

    /// A slot from the local name's bytes (FNV-1a over its first 12) and the namespace's length:
    /// the usual names of stanzas (message, body, type, to, id, iq, ping, presence, show, …) fall
    /// at most two to a pair of slots.
    static func slot(of name: XMLName) -> Int {
        var hash: UInt32 = 0x811C_9DC5 ^ UInt32(truncatingIfNeeded: name.namespace?.utf8.count ?? 0)
        for byte in name.local.utf8.prefix(12) { hash = (hash ^ UInt32(byte)) &* 0x0100_0193 }
        hash ^= hash >> 13
        return Int(hash) & (recentNameSlots - 1)
    }
}
