import CExpat

/// The stream parser's cache of names: from the bytes Expat reports for a name (its namespace
/// triplet `uri␟local␟prefix`, or a namespace declaration's prefix and URI) to the `XMLName`
/// built from them, and from each cached name to its index in the name table of the tree being
/// built. A recurring name therefore costs one hash and one byte comparison, and each distinct
/// name is stored once per tree (the tree's nodes hold 4-byte indices, never strings).
///
/// Open addressing with linear probing over a power-of-two table. The table is emptied when half
/// of it is in use, so a peer that sends ever new names costs bounded memory (`capacity` entries
/// of at most `maximumKeyLength` bytes each; longer names are not cached) and an occasional
/// rebuild. The hash is seeded per cache so that colliding names cannot be prepared in advance.
struct XMLNameCache {
    /// One slot. `hash == 0` marks an empty slot.
    private struct Slot {
        var hash: UInt64 = 0
        var keyStart: Int32 = 0
        var keyLength: Int32 = 0
        /// The tree (`XMLTreeBuilder.generation`) in which `treeIndex` is valid.
        var generation: UInt64 = 0
        var treeIndex: UInt32 = 0
        /// The index of the cached name in `names`.
        var name: UInt32 = 0
    }

    /// The longest key that is cached.
    static let maximumKeyLength = 512

    private var slots: [Slot]
    private var names: [XMLName] = []
    private var keys: [UInt8] = []
    private let mask: Int
    private let seed: UInt64

    /// A cache with `capacity` slots (rounded up to a power of two, at least 16), of which at
    /// most half are used.
    init(capacity: Int) {
        var size = 16
        while size < capacity { size <<= 1 }
        slots = Array(repeating: Slot(), count: size)
        mask = size - 1
        seed = UInt64.random(in: 1...UInt64.max)
    }

    /// The index in `builder`'s name table of the name whose key is the `count` bytes at `key`,
    /// made by `make` and added to the table if this tree has not used it yet.
    mutating func treeIndex(
        of key: UnsafeRawPointer,
        count: Int,
        in builder: inout XMLTreeBuilder,
        make: (UnsafeRawBufferPointer) -> XMLName
    ) -> UInt32 {
        guard count <= Self.maximumKeyLength else {
            return unsafe builder.addName(make(UnsafeRawBufferPointer(start: key, count: count)))
        }
        let slot = unsafe find(key, count, make)
        if slots[slot].generation != builder.generation {
            slots[slot].generation = builder.generation
            slots[slot].treeIndex = builder.addName(names[Int(slots[slot].name)])
        }
        return slots[slot].treeIndex
    }

    /// The name whose key is the `count` bytes at `key`.
    mutating func name(
        of key: UnsafeRawPointer,
        count: Int,
        make: (UnsafeRawBufferPointer) -> XMLName
    ) -> XMLName {
        guard count <= Self.maximumKeyLength else {
            return unsafe make(UnsafeRawBufferPointer(start: key, count: count))
        }
        return names[Int(slots[unsafe find(key, count, make)].name)]
    }

    /// The slot of the key, inserted (with a name from `make`) if it is not cached.
    private mutating func find(
        _ key: UnsafeRawPointer,
        _ count: Int,
        _ make: (UnsafeRawBufferPointer) -> XMLName
    ) -> Int {
        let hash = unsafe Self.hash(key, count, seed: seed)
        var slot = Int(truncatingIfNeeded: hash >> 32) & mask
        while true {
            let candidate = slots[slot]
            if candidate.hash == 0 { break }
            if candidate.hash == hash, Int(candidate.keyLength) == count,
                unsafe keys.withUnsafeBytes({ keys in
                    unsafe memcmp(keys.baseAddress! + Int(candidate.keyStart), key, count) == 0
                })
            {
                return slot
            }
            slot = (slot + 1) & mask
        }
        if names.count >= (mask + 1) / 2 {
            // Half full: start again (names already in trees stay there).
            for index in slots.indices { slots[index] = Slot() }
            names.removeAll(keepingCapacity: true)
            keys.removeAll(keepingCapacity: true)
            slot = Int(truncatingIfNeeded: hash >> 32) & mask
        }
        let bytes = unsafe UnsafeRawBufferPointer(start: key, count: count)
        slots[slot] = Slot(
            hash: hash,
            keyStart: Int32(keys.count),
            keyLength: Int32(count),
            generation: 0,
            treeIndex: 0,
            name: UInt32(names.count)
        )
        unsafe keys.append(contentsOf: bytes)
        names.append(unsafe make(bytes))
        return slot
    }

    /// A 64-bit hash of the bytes, never 0, read a word at a time.
    private static func hash(_ key: UnsafeRawPointer, _ count: Int, seed: UInt64) -> UInt64 {
        var hash = seed ^ UInt64(truncatingIfNeeded: count)
        var offset = 0
        while offset + 8 <= count {
            let word = unsafe key.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            hash = (hash ^ word) &* 0x9E37_79B9_7F4A_7C15
            hash ^= hash >> 29
            offset += 8
        }
        if offset < count {
            var word: UInt64 = 0
            var shift: UInt64 = 0
            while offset < count {
                word |= UInt64(unsafe key.load(fromByteOffset: offset, as: UInt8.self)) << shift
                shift += 8
                offset += 1
            }
            hash = (hash ^ word) &* 0x9E37_79B9_7F4A_7C15
            hash ^= hash >> 29
        }
        hash = (hash ^ (hash >> 32)) &* 0xD6E8_FEB8_6659_FD93
        return hash == 0 ? 1 : hash
    }
}
