/// The storage of one element tree: every node in document order, each distinct name once (the
/// nodes refer to names by index), and every text and attribute value in one byte run, all in a
/// single allocation. A parsed stanza therefore costs one allocation whatever its size, its
/// nodes hold no references, and copying an element copies one reference.
///
/// Sendable although `ManagedBuffer` (which the storage is) is not: the storage is never
/// mutated after `XMLTreeStorage.make`, and the names it refers to are immutable and Sendable.
struct XMLTree: @unchecked Sendable {
    enum Kind: UInt8, Sendable {
        case element, attribute, namespace, text
    }

    /// One node. An element is followed by its attributes and namespace declarations, then its
    /// children; `start` is the index of its first child node and `end` the index after its
    /// subtree. For attributes and text, `start..<end` is the value's range in the text bytes.
    /// `name` is an index into the name table (unused for text); a namespace declaration's name
    /// keeps its prefix in `prefix` and its URI in `namespace`.
    struct Node: Sendable, BitwiseCopyable {
        var kind: Kind
        var name: UInt32
        var start: Int32
        var end: Int32
    }

    let storage: XMLTreeStorage

    /// The node at `index`.
    func node(_ index: Int) -> Node {
        storage.node(index)
    }

    /// The shared name at `index` in the name table.
    func nameBox(_ index: UInt32) -> XMLNameBox {
        storage.name(Int(index))
    }

    /// The name of an element, attribute or namespace declaration node.
    func name(_ node: Node) -> XMLName {
        storage.name(Int(node.name)).name
    }

    /// Calls `body` with the name at `index` (a node's `name`), retaining nothing for it.
    func withName<Result>(_ index: UInt32, _ body: (XMLName) -> Result) -> Result {
        storage.withName(Int(index), body)
    }

    /// The value of an attribute or text node.
    func string(_ node: Node) -> String {
        withBytes(of: node) { bytes in
            unsafe bytes.withUnsafeBufferPointer { unsafe String(decoding: $0, as: UTF8.self) }
        }
    }

    /// Calls `body` with the value bytes of an attribute or text node.
    func withBytes<Result>(of node: Node, _ body: (Span<UInt8>) throws -> Result) rethrows -> Result {
        try storage.withText(Int(node.start)..<Int(node.end), body)
    }
}

/// A name shared by reference, so that a tree's name table holds one counted reference per name
/// (instead of three strings) and trees from one parser share the cached names.
final class XMLNameBox: Sendable {
    let name: XMLName

    init(_ name: XMLName) {
        self.name = name
    }
}

/// The names of the trees one stream parser builds, shared by those trees: a tree's nodes index
/// the table (each tree holds one reference to it) instead of each tree holding a counted
/// reference to every name it uses. Append-only: an index, once given, names the same box for the
/// table's whole life. The parser's name cache appends (on the parser's thread); when the table
/// is full, the cache continues in a larger copy (same indices) and, at the start of a tree, in
/// a new empty table once it has grown past its limit. Trees keep the tables they index.
///
/// Trees on other threads read entries below the count their tree was made with, while the
/// parser may append above it: disjoint memory, and the header's count is read only by the
/// parser (a tree checks indices against its own count).
@safe final class XMLNameTable: ManagedBuffer<XMLNameTable.Header, XMLNameBox> {
    struct Header {
        var count: Int
        let capacity: Int
    }

    /// An empty table with room for `capacity` names, or a copy of `previous` with that room.
    static func make(capacity: Int, copying previous: XMLNameTable? = nil) -> XMLNameTable {
        let count = previous?.count ?? 0
        precondition(capacity >= count, "a name table smaller than its contents")
        let buffer = Self.create(minimumCapacity: capacity) { _ in Header(count: count, capacity: capacity) }
        let table = unsafe unsafeDowncast(buffer, to: XMLNameTable.self)
        if let previous, count > 0 {
            unsafe table.withUnsafeMutablePointerToElements { target in
                unsafe previous.withUnsafeMutablePointerToElements { source in
                    unsafe target.initialize(from: source, count: count)
                }
            }
        }
        return table
    }

    /// The number of names (the parser's thread only).
    var count: Int { unsafe withUnsafeMutablePointerToHeader { unsafe $0.pointee.count } }

    /// Whether another name fits.
    var isFull: Bool {
        unsafe withUnsafeMutablePointerToHeader { unsafe $0.pointee.count == $0.pointee.capacity }
    }

    /// Appends a name (the parser's thread only; not when `isFull`) and returns its index.
    func append(_ box: XMLNameBox) -> UInt32 {
        unsafe withUnsafeMutablePointers { header, elements in
            let index = unsafe header.pointee.count
            unsafe precondition(index < header.pointee.capacity, "name table full")
            unsafe (elements + index).initialize(to: box)
            unsafe header.pointee.count = index + 1
            return UInt32(index)
        }
    }

    /// The name at `index`, which the caller has checked against its own count of this table.
    @inline(__always)
    func box(_ index: Int) -> XMLNameBox {
        unsafe withUnsafeMutablePointerToElements { unsafe $0[index] }
    }

    /// The name at `index` (as `box`), not retained: valid while the table is.
    @inline(__always)
    func unretainedBox(_ index: Int) -> Unmanaged<XMLNameBox> {
        unsafe withUnsafeMutablePointerToElements {
            unsafe UnsafeRawPointer($0 + index).load(as: Unmanaged<XMLNameBox>.self)
        }
    }

    deinit {
        _ = unsafe withUnsafeMutablePointers { header, elements in
            unsafe elements.deinitialize(count: header.pointee.count)
        }
    }
}

/// The counts in the header of an `XMLTreeStorage`.
@safe struct XMLTreeCounts {
    var nodes: Int
    /// The names the nodes may index (in the tail, or the first this many of `sharedNames`).
    var names: Int
    var textBytes: Int
    /// The stream parser's table the names are in (retained by the tree), or nil when the tree
    /// holds its own names in the tail.
    var sharedNames: Unmanaged<XMLNameTable>?

    /// The names held in the tail.
    var ownNames: Int { unsafe sharedNames == nil ? names : 0 }
}

/// One element tree in one allocation: the counts in the header; in the tail, the nodes, then
/// the name references (each owned: retained on creation, released in `deinit`; none when the
/// tree indexes a parser's shared table instead), then the text bytes. Immutable once created;
/// every access is checked against the counts.
@safe final class XMLTreeStorage: ManagedBuffer<XMLTreeCounts, XMLTree.Node> {
    /// A tree holding copies of the nodes and text and the (already retained) name references,
    /// whose ownership passes to the tree.
    static func make(
        nodes: UnsafeBufferPointer<XMLTree.Node>,
        names: UnsafeBufferPointer<Unmanaged<XMLNameBox>>,
        text: UnsafeBufferPointer<UInt8>
    ) -> XMLTreeStorage {
        unsafe make(nodes: nodes, names: names, nameCount: names.count, shared: nil, text: text)
    }

    /// A tree holding copies of the nodes and text whose names are the first `nameCount` of
    /// `table` (which the tree retains).
    static func make(
        nodes: UnsafeBufferPointer<XMLTree.Node>,
        sharing table: XMLNameTable,
        nameCount: Int,
        text: UnsafeBufferPointer<UInt8>
    ) -> XMLTreeStorage {
        unsafe make(
            nodes: nodes,
            names: UnsafeBufferPointer(start: nil, count: 0),
            nameCount: nameCount,
            shared: Unmanaged.passRetained(table),
            text: text
        )
    }

    private static func make(
        nodes: UnsafeBufferPointer<XMLTree.Node>,
        names: UnsafeBufferPointer<Unmanaged<XMLNameBox>>,
        nameCount: Int,
        shared: Unmanaged<XMLNameTable>?,
        text: UnsafeBufferPointer<UInt8>
    ) -> XMLTreeStorage {
        let nodeStride = MemoryLayout<XMLTree.Node>.stride
        let nameStride = unsafe MemoryLayout<Unmanaged<XMLNameBox>>.stride
        // Room for the nodes, alignment padding, the names and the text, in node-sized units.
        let bytes = nodes.count * nodeStride + nameStride + names.count * nameStride + text.count
        let units = (bytes + nodeStride - 1) / nodeStride
        let counts = unsafe XMLTreeCounts(
            nodes: nodes.count,
            names: nameCount,
            textBytes: text.count,
            sharedNames: shared
        )
        let buffer = Self.create(minimumCapacity: units) { _ in counts }
        let storage = unsafe unsafeDowncast(buffer, to: XMLTreeStorage.self)
        unsafe storage.withUnsafeMutablePointerToElements { elements in
            if nodes.count > 0 { unsafe elements.initialize(from: nodes.baseAddress!, count: nodes.count) }
            let namePointer = unsafe Self.names(elements, nodes.count)
            if names.count > 0 { unsafe namePointer.initialize(from: names.baseAddress!, count: names.count) }
            let textPointer = unsafe UnsafeMutableRawPointer(namePointer + names.count)
            if text.count > 0 {
                unsafe textPointer.copyMemory(from: text.baseAddress!, byteCount: text.count)
            }
        }
        return storage
    }

    deinit {
        unsafe withUnsafeMutablePointers { counts, elements in
            if let shared = unsafe counts.pointee.sharedNames {
                unsafe shared.release()
                return
            }
            let names = unsafe Self.names(elements, counts.pointee.nodes)
            for index in unsafe 0..<counts.pointee.names { unsafe names[index].release() }
        }
    }

    /// Where the names start: after the nodes, aligned for a reference.
    private static func names(
        _ elements: UnsafeMutablePointer<XMLTree.Node>,
        _ nodeCount: Int
    ) -> UnsafeMutablePointer<Unmanaged<XMLNameBox>> {
        unsafe UnsafeMutableRawPointer(elements + nodeCount).alignedUp(for: Unmanaged<XMLNameBox>.self)
            .assumingMemoryBound(to: Unmanaged<XMLNameBox>.self)
    }

    func node(_ index: Int) -> XMLTree.Node {
        unsafe withUnsafeMutablePointers { counts, elements in
            unsafe precondition(index >= 0 && index < counts.pointee.nodes, "node index out of range")
            return unsafe elements[index]
        }
    }

    func name(_ index: Int) -> XMLNameBox {
        unsafe withUnsafeMutablePointers { counts, elements in
            unsafe precondition(index >= 0 && index < counts.pointee.names, "name index out of range")
            if let shared = unsafe counts.pointee.sharedNames {
                return unsafe shared._withUnsafeGuaranteedRef { $0.box(index) }
            }
            return unsafe Self.names(elements, counts.pointee.nodes)[index].takeUnretainedValue()
        }
    }

    /// Calls `body` with the name at `index`, without retaining its box or its strings (for
    /// the lookups that only compare a name or take one of its parts).
    func withName<Result>(_ index: Int, _ body: (XMLName) -> Result) -> Result {
        unsafe withUnsafeMutablePointers { counts, elements in
            unsafe precondition(index >= 0 && index < counts.pointee.names, "name index out of range")
            let box =
                if let shared = unsafe counts.pointee.sharedNames {
                    unsafe shared._withUnsafeGuaranteedRef { unsafe $0.unretainedBox(index) }
                } else {
                    unsafe Self.names(elements, counts.pointee.nodes)[index]
                }
            return unsafe box._withUnsafeGuaranteedRef { body($0.name) }
        }
    }

    func withText<Result>(_ range: Range<Int>, _ body: (Span<UInt8>) throws -> Result) rethrows -> Result {
        try unsafe withUnsafeMutablePointers { counts, elements in
            unsafe precondition(
                range.lowerBound >= 0 && range.upperBound <= counts.pointee.textBytes,
                "text out of range"
            )
            let names = unsafe Self.names(elements, counts.pointee.nodes)
            let text = unsafe UnsafeRawPointer(names + counts.pointee.ownNames).assumingMemoryBound(to: UInt8.self)
            let buffer = unsafe UnsafeBufferPointer(start: text + range.lowerBound, count: range.count)
            return try body(unsafe buffer.span)
        }
    }
}
