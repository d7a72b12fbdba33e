/// The stream parser's cache of names: from a key (a qualified name as written, `prefix:local`
/// or `local`, with the namespace declaration in scope for it; or a namespace declaration's
/// prefix and URI) to the index of the `XMLName` built from it in the parser's shared name table
/// (`XMLNameTable`), which the trees' nodes hold. A recurring name therefore costs one hash and
/// one byte comparison, and a tree costs one counted reference to the table however many names
/// it uses.
///
/// Open addressing with linear probing over a power-of-two table. The table starts small (32
/// slots, about 1.3 KiB, so that an idle connection's parser stays small) and doubles when half of
/// it is in use, up to `capacity`; at that size it is emptied instead, so a peer that sends ever new
/// names costs bounded memory (`capacity` entries of at most `maximumKeyLength` bytes each; longer
/// names are not cached) and an occasional rebuild. The shared name table is only replaced
/// between trees (`startTree`): until then, names met again after the cache was emptied are
/// appended to it again. The hash is seeded per cache so that colliding names cannot be prepared
/// in advance.
///
/// The slots and key bytes are fixed-size memory that the cache allocates once and owns alone
/// (hence `~Copyable`); lookups reach them without bounds or exclusivity checks at run time
/// (every slot index is masked, and key bytes are only written after checking the arena's size).
@safe struct XMLNameCache: ~Copyable {
    /// One slot. `hash == 0` marks an empty slot.
    private struct Slot {
        var hash: UInt64 = 0
        /// The key's edges (see `edges`): for keys of up to 16 bytes they are the whole key.
        var first: UInt64 = 0
        var last: UInt64 = 0
        var keyStart: Int32 = 0
        var keyLength: Int32 = 0
        /// The index of the cached name in `table`.
        var name: UInt32 = 0
        /// The key's scope: the table index of the namespace declaration a qualified name was
        /// resolved with, or `noScope`.
        var scope: UInt32 = 0
    }

    /// The scope of a name in no namespace (an unprefixed attribute, an unprefixed element with
    /// no default namespace), and of keys that are not names (declarations).
    static let noScope = UInt32.max

    /// The longest key that is cached.
    static let maximumKeyLength = 512

    private var slots: UnsafeMutableBufferPointer<Slot>
    private var keys: UnsafeMutableRawBufferPointer
    /// The names the slots index (and the names of keys too long to cache), shared with the
    /// trees made since the table was started.
    private(set) var table: XMLNameTable
    /// Slots in use.
    private var entries = 0
    /// Bytes of the key arena in use.
    private var keyBytes = 0
    private var mask: Int
    /// The most slots the table grows to.
    private let maximumSize: Int
    private let seed: UInt64

    /// The slots a new cache starts with.
    static let initialSize = 32

    /// A cache growing to `capacity` slots (rounded up to a power of two, at least 16), of which
    /// at most half are used, with 32 bytes of key space per slot.
    init(capacity: Int) {
        var size = 16
        while size < capacity { size <<= 1 }
        maximumSize = size
        let initial = min(size, Self.initialSize)
        unsafe slots = .allocate(capacity: initial)
        unsafe slots.initialize(repeating: Slot())
        unsafe keys = .allocate(byteCount: max(initial * 32, Self.maximumKeyLength), alignment: 8)
        mask = initial - 1
        seed = UInt64.random(in: 1...UInt64.max)
        table = XMLNameTable.make(capacity: initial / 2)
    }

    /// The number of slots now.
    var size: Int { mask + 1 }

    /// Doubles the table (and the key arena), keeping every entry.
    private mutating func grow() {
        let newSize = (mask + 1) * 2
        let newMask = newSize - 1
        let newSlots = UnsafeMutableBufferPointer<Slot>.allocate(capacity: newSize)
        unsafe newSlots.initialize(repeating: Slot())
        for index in unsafe slots.indices {
            let entry = unsafe slots[index]
            guard entry.hash != 0 else { continue }
            var slot = Int(truncatingIfNeeded: entry.hash >> 32) & newMask
            while unsafe newSlots[slot].hash != 0 { slot = (slot + 1) & newMask }
            unsafe newSlots[slot] = entry
        }
        let newKeys = UnsafeMutableRawBufferPointer.allocate(
            byteCount: max(newSize * 32, Self.maximumKeyLength),
            alignment: 8
        )
        unsafe newKeys.copyMemory(from: UnsafeRawBufferPointer(rebasing: keys[0..<keyBytes]))
        unsafe slots.deallocate()
        unsafe keys.deallocate()
        unsafe slots = newSlots
        unsafe keys = newKeys
        mask = newMask
    }

    deinit {
        unsafe slots.deallocate()
        unsafe keys.deallocate()
    }

    /// The index in `table` of the name whose key is the `count` bytes at `key` in `scope`, made
    /// by `make` (from the key's bytes and the table, where the scope's declaration is) and added
    /// to the table if it is not cached.
    @inline(__always)
    mutating func index(
        of key: UnsafeRawPointer,
        count: Int,
        scope: UInt32,
        make: (UnsafeRawBufferPointer, XMLNameTable) -> XMLName
    ) -> UInt32 {
        guard count > 0, count <= Self.maximumKeyLength else {
            return unsafe append(make(UnsafeRawBufferPointer(start: key, count: count), table))
        }
        let slot = unsafe find(key, count, scope, make)
        return unsafe slots[slot].name
    }

    /// The index in `table` of the name whose key is the `count` bytes at `key` in `scope`, if
    /// it is cached.
    @inline(__always)
    func cachedIndex(of key: UnsafeRawPointer, count: Int, scope: UInt32) -> UInt32? {
        guard count > 0, count <= Self.maximumKeyLength else { return nil }
        let (first, last) = unsafe Self.edges(key, count)
        let hash = unsafe Self.hash(key, count, first, last, seed: seed ^ UInt64(scope) &* Self.scopeMultiplier)
        var slot = Int(truncatingIfNeeded: hash >> 32) & mask
        while true {
            let candidate = unsafe slots[slot]
            if candidate.hash == 0 { return nil }
            if candidate.hash == hash, candidate.first == first, candidate.last == last,
                Int(candidate.keyLength) == count, candidate.scope == scope,
                unsafe count <= 16 || Self.middleEquals(keys.baseAddress! + Int(candidate.keyStart), key, count)
            {
                return candidate.name
            }
            slot = (slot &+ 1) & mask
        }
    }

    /// Spreads a key's scope over the hash seed.
    private static let scopeMultiplier: UInt64 = 0xFF51_AFD7_ED55_8CCD

    /// Called before a tree's first name: starts a new shared table (and empties the cache,
    /// whose slots index the old one) once the table holds more names than the cache can
    /// (names met again after the cache was emptied, or too long to cache). The trees made so far
    /// keep the old table. Returns the old table when it was replaced (indices the caller holds
    /// refer to it).
    @discardableResult
    mutating func startTree() -> XMLNameTable? {
        guard table.count > maximumSize / 2 else { return nil }
        let old = table
        table = XMLNameTable.make(capacity: (mask + 1) / 2)
        empty()
        return old
    }

    /// Appends a name to the shared table (continuing in a larger copy when it is full).
    private mutating func append(_ name: XMLName) -> UInt32 {
        if table.isFull { table = XMLNameTable.make(capacity: 2 * table.count, copying: table) }
        return table.append(XMLNameBox(name))
    }

    /// Empties the slots and the key arena (the shared table keeps its names).
    private mutating func empty() {
        unsafe slots.update(repeating: Slot())
        entries = 0
        keyBytes = 0
    }

    /// The slot of the key (1...maximumKeyLength bytes in `scope`), inserted (with a name from
    /// `make`) if it is not cached.
    private mutating func find(
        _ key: UnsafeRawPointer,
        _ count: Int,
        _ scope: UInt32,
        _ make: (UnsafeRawBufferPointer, XMLNameTable) -> XMLName
    ) -> Int {
        let (first, last) = unsafe Self.edges(key, count)
        let hash = unsafe Self.hash(key, count, first, last, seed: seed ^ UInt64(scope) &* Self.scopeMultiplier)
        var slot = Int(truncatingIfNeeded: hash >> 32) & mask
        while true {
            let candidate = unsafe slots[slot]
            if candidate.hash == 0 { break }
            if candidate.hash == hash, candidate.first == first, candidate.last == last,
                Int(candidate.keyLength) == count, candidate.scope == scope,
                unsafe count <= 16 || Self.middleEquals(keys.baseAddress! + Int(candidate.keyStart), key, count)
            {
                return slot
            }
            slot = (slot &+ 1) & mask
        }
        while unsafe entries >= (mask + 1) / 2 || keyBytes + count > keys.count {
            if mask + 1 < maximumSize {
                grow()
            } else {
                // Full: start again (the names stay in the shared table until `startTree`).
                empty()
            }
            slot = Int(truncatingIfNeeded: hash >> 32) & mask
            while unsafe slots[slot].hash != 0 { slot = (slot + 1) & mask }
        }
        let bytes = unsafe UnsafeRawBufferPointer(start: key, count: count)
        let name = unsafe append(make(bytes, table))
        unsafe slots[slot] = Slot(
            hash: hash,
            first: first,
            last: last,
            keyStart: Int32(keyBytes),
            keyLength: Int32(count),
            name: name,
            scope: scope
        )
        entries += 1
        unsafe UnsafeMutableRawBufferPointer(rebasing: keys[keyBytes..<(keyBytes + count)]).copyMemory(
            from: bytes
        )
        keyBytes += count
        return slot
    }

    /// The first and last eight bytes of a key of at least one byte (overlapping when shorter
    /// than 16). Under eight bytes: the first four and last four, or the first, middle and last
    /// byte. Together with the length they determine keys of up to 16 bytes completely.
    @inline(__always)
    static func edges(_ key: UnsafeRawPointer, _ count: Int) -> (UInt64, UInt64) {
        if count >= 8 {
            return unsafe (
                key.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                key.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            )
        }
        if count >= 4 {
            return unsafe (
                UInt64(key.loadUnaligned(fromByteOffset: 0, as: UInt32.self)),
                UInt64(key.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self))
            )
        }
        let first = unsafe key.load(fromByteOffset: 0, as: UInt8.self)
        let middle = unsafe key.load(fromByteOffset: count / 2, as: UInt8.self)
        let last = unsafe key.load(fromByteOffset: count - 1, as: UInt8.self)
        return (UInt64(first) | UInt64(middle) << 8, UInt64(last))
    }

    /// Whether two keys of `count` (> 16) bytes whose edges are equal are equal in between.
    static func middleEquals(_ lhs: UnsafeRawPointer, _ rhs: UnsafeRawPointer, _ count: Int) -> Bool {
        var offset = 8
        while offset &+ 8 < count {
            let left = unsafe lhs.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            let right = unsafe rhs.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            if left != right { return false }
            offset &+= 8
        }
        return true
    }

    /// A 64-bit hash of the key, never 0: its edges, and its middle words for keys over 16 bytes.
    @inline(__always)
    private static func hash(
        _ key: UnsafeRawPointer,
        _ count: Int,
        _ first: UInt64,
        _ last: UInt64,
        seed: UInt64
    ) -> UInt64 {
        var hash = seed ^ UInt64(truncatingIfNeeded: count)
        hash = (hash ^ first) &* 0x9E37_79B9_7F4A_7C15
        hash ^= hash >> 29
        var offset = 8
        while offset &+ 8 < count {
            let word = unsafe key.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            hash = (hash ^ word) &* 0x9E37_79B9_7F4A_7C15
            hash ^= hash >> 29
            offset &+= 8
        }
        hash = (hash ^ last) &* 0xD6E8_FEB8_6659_FD93
        hash ^= hash >> 32
        return hash == 0 ? 1 : hash
    }
}
