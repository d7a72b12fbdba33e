@_spi(TetherInternal) import TetherCore

/// A child of an element: a nested element or a run of text.
public enum XNode: Hashable, Sendable {
    /// A nested element.
    case element(XElement)
    /// Character data (entities and character references resolved, CDATA included).
    case text(String)
}

/// An XML element with its attributes, namespace declarations and children: an immutable value.
///
/// Parsed elements (from `XMLStreamParser`) keep the whole tree in one buffer and hand out views
/// of it: `children`, `attributes` and `text` build Swift values on demand. Equality is the XML
/// Infoset's: names (namespace and local part), attributes in order and children, with adjacent
/// text merged; prefixes and namespace declarations are presentation and do not count.
///
/// Named `XElement` (as in .NET's LINQ to XML), not `XMLElement`, which Foundation has on Apple
/// platforms: a file can import Foundation and TetherXML without qualifying either.
public struct XElement: Hashable, Sendable, CustomStringConvertible {
    let tree: XMLTree
    let index: Int

    init(tree: XMLTree, index: Int) {
        self.tree = tree
        self.index = index
    }

    var node: XMLTree.Node { tree.node(index) }

    /// The element's name.
    public var name: XMLName { tree.name(node) }

    /// The element's local name.
    public var localName: String { tree.withName(node.name) { $0.local } }

    /// The element's namespace URI.
    public var namespace: String? { tree.withName(node.name) { $0.namespace } }

    /// Whether the element's local name is `localName` (compared in place: `localName` copies
    /// the name out of the tree).
    public func hasLocalName(_ localName: String) -> Bool {
        tree.withName(node.name) { $0.local == localName }
    }

    /// Whether the element is in `namespace` (nil: in none), compared in place.
    public func isIn(namespace: String?) -> Bool {
        tree.withName(node.name) { $0.namespace == namespace }
    }

    /// Whether the element is `localName` in `namespace`, compared in place.
    public func isNamed(_ localName: String, namespace: String?) -> Bool {
        tree.withName(node.name) { $0.local == localName && $0.namespace == namespace }
    }

    /// The index range of the attribute and namespace-declaration nodes.
    var headerRange: Range<Int> { (index + 1)..<Int(node.start) }

    /// The attributes, in document order.
    public var attributes: [XMLAttribute] {
        headerRange.compactMap { position in
            let attribute = tree.node(position)
            return attribute.kind == .attribute ? XMLAttribute(tree.name(attribute), tree.string(attribute)) : nil
        }
    }

    /// The namespace declarations written on this element.
    public var namespaceDeclarations: [XMLNamespaceDeclaration] {
        headerRange.compactMap { position in
            let declaration = tree.node(position)
            guard declaration.kind == .namespace else { return nil }
            let name = tree.name(declaration)
            return XMLNamespaceDeclaration(prefix: name.prefix, uri: name.namespace ?? "")
        }
    }

    /// The value of the attribute `local` in `namespace` (nil: no namespace, as unprefixed
    /// attributes are).
    public func attribute(_ local: String, namespace: String? = nil) -> String? {
        for position in headerRange {
            let attribute = tree.node(position)
            guard attribute.kind == .attribute,
                tree.withName(attribute.name, { $0.local == local && $0.namespace == namespace })
            else { continue }
            return tree.string(attribute)
        }
        return nil
    }

    /// Calls `body` with each child node index, in order, skipping the children's subtrees.
    func forEachChildIndex(_ body: (Int) throws -> Void) rethrows {
        var position = Int(node.start)
        let end = Int(node.end)
        while position < end {
            try body(position)
            let child = tree.node(position)
            position = child.kind == .element ? Int(child.end) : position + 1
        }
    }

    /// The children: elements and text runs, in document order.
    public var childNodes: [XNode] {
        var result: [XNode] = []
        forEachChildIndex { position in
            let child = tree.node(position)
            if child.kind == .element {
                result.append(.element(XElement(tree: tree, index: position)))
            } else {
                result.append(.text(tree.string(child)))
            }
        }
        return result
    }

    /// The child elements, in document order.
    public var children: [XElement] {
        var result: [XElement] = []
        forEachChildIndex { position in
            if tree.node(position).kind == .element { result.append(XElement(tree: tree, index: position)) }
        }
        return result
    }

    /// The first child element named `local` in `namespace` (any namespace when nil).
    public func firstChild(_ local: String, namespace: String? = nil) -> XElement? {
        var found: XElement?
        forEachChildIndex { position in
            guard found == nil else { return }
            let child = tree.node(position)
            guard child.kind == .element else { return }
            if tree.withName(child.name, { $0.local == local && (namespace == nil || $0.namespace == namespace) }) {
                found = XElement(tree: tree, index: position)
            }
        }
        return found
    }

    /// The first child element for which `predicate` is true (no array of children is built).
    public func firstChild(where predicate: (XElement) throws -> Bool) rethrows -> XElement? {
        var position = Int(node.start)
        let end = Int(node.end)
        while position < end {
            let child = tree.node(position)
            if child.kind == .element {
                let element = XElement(tree: tree, index: position)
                if try predicate(element) { return element }
                position = Int(child.end)
            } else {
                position += 1
            }
        }
        return nil
    }

    /// The child elements named `local` in `namespace` (any namespace when nil).
    public func children(_ local: String, namespace: String? = nil) -> [XElement] {
        children.filter { $0.localName == local && (namespace == nil || $0.namespace == namespace) }
    }

    /// The element's direct text (its text children joined).
    public var text: String {
        // One text child (a body, a status): its string straight from the tree, with no array
        // in between. Several (text around child elements): joined.
        var only: XMLTree.Node?
        var joined: [UInt8]?
        forEachChildIndex { position in
            let child = tree.node(position)
            guard child.kind == .text else { return }
            if joined != nil {
                tree.withBytes(of: child) { joined!.append(copying: $0) }
            } else if let first = only {
                var bytes: [UInt8] = []
                tree.withBytes(of: first) { bytes.append(copying: $0) }
                tree.withBytes(of: child) { bytes.append(copying: $0) }
                joined = bytes
            } else {
                only = child
            }
        }
        if let joined { return String(decoding: joined, as: UTF8.self) }
        return only.map(tree.string) ?? ""
    }

    /// Whether the element has neither children nor text.
    public var isEmpty: Bool { Int(node.start) == Int(node.end) }

    /// A standalone serialisation (namespaces declared so that it parses on its own).
    public var description: String { XMLSerializer.string(self) }

    // MARK: - Building

    /// Creates an element. `namespaceDeclarations` are written as given; the serializer adds any
    /// others the names need.
    public init(
        _ name: XMLName,
        attributes: [XMLAttribute] = [],
        namespaceDeclarations: [XMLNamespaceDeclaration] = [],
        children: [XNode] = []
    ) {
        self = XMLSpareBuilder.withBuilder { spare in
            spare.builder.append(
                name,
                attributes: attributes,
                namespaceDeclarations: namespaceDeclarations,
                children: children,
                boxes: spare
            )
            return spare.builder.finish()
        }
    }

    /// A copy of this element as the root of its own tree (releasing the rest of a larger tree).
    public func compacted() -> XElement {
        var builder = XMLTreeBuilder()
        builder.copy(self)
        return builder.finish()
    }

    // MARK: - Equality

    /// Whether `other` is this very node of this very tree (not merely an equal element): a
    /// constant tree, recognised without comparing it.
    package func isSameNode(as other: XElement) -> Bool {
        tree.storage === other.tree.storage && index == other.index
    }

    public static func == (lhs: XElement, rhs: XElement) -> Bool {
        guard lhs.name == rhs.name, lhs.attributes == rhs.attributes else { return false }
        return lhs.mergedChildren == rhs.mergedChildren
    }

    /// Children with adjacent text runs merged and empty text dropped.
    var mergedChildren: [XNode] {
        var result: [XNode] = []
        for child in childNodes {
            if case .text(let text) = child {
                if text.isEmpty { continue }
                if case .text(let previous) = result.last {
                    result[result.count - 1] = .text(previous + text)
                    continue
                }
            }
            result.append(child)
        }
        return result
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(attributes)
        hasher.combine(mergedChildren)
    }
}

/// Builds element trees into reusable buffers: the stream parser keeps one and copies each
/// finished stanza out into an exactly sized `XMLTreeStorage`.
///
/// Names go into the tree's name table first (`addName`), or, for the stream parser's trees, into
/// the parser's shared table (`XMLNameTable`); elements, attributes and namespace declarations
/// then refer to them by index. After an element's attributes and declarations,
/// `endHeader(of:)` marks where its children start.
@safe struct XMLTreeBuilder: ~Copyable {
    var nodes: PlainBuffer<XMLTree.Node>
    var text: PlainBuffer<UInt8>
    /// The name table, each reference retained by the builder until `finish()` hands it to the
    /// tree (or `reset()` or `deinit` releases it).
    var names: PlainBuffer<Unmanaged<XMLNameBox>>
    /// Indices of the elements still open.
    var open: PlainBuffer<Int>
    /// The text node that character data continues (Expat delivers text in pieces), if any.
    var currentText: Int?

    /// A builder with the parser's buffers (sized for stanzas, reused from one to the next).
    init() {
        self.init(nodes: 64, textBytes: 1024, names: 16, depth: 16)
    }

    /// A builder whose buffers start with room for this much (each grows as needed). A tree
    /// made in code (a request, an answer) starts small, in buffers the allocator's per-thread
    /// caches serve.
    init(nodes: Int, textBytes: Int, names: Int, depth: Int) {
        self.nodes = PlainBuffer(capacity: nodes)
        text = PlainBuffer(capacity: textBytes)
        unsafe self.names = PlainBuffer(capacity: names)
        open = PlainBuffer(capacity: depth)
    }

    var depth: Int { open.count }

    /// Adds a name to the tree's name table and returns its index.
    mutating func addName(_ name: XMLName) -> UInt32 {
        addName(XMLNameBox(name))
    }

    /// Adds a shared name to the tree's name table and returns its index.
    mutating func addName(_ name: XMLNameBox) -> UInt32 {
        unsafe names.append(Unmanaged.passRetained(name))
        return unsafe UInt32(names.count - 1)
    }

    deinit {
        for index in unsafe 0..<names.count { unsafe names[index].release() }
    }

    private mutating func releaseNames() {
        for index in unsafe 0..<names.count { unsafe names[index].release() }
        unsafe names.removeAll()
    }

    /// Starts an element named by the name-table entry `name` and returns its node index; add
    /// its attributes and namespace declarations next, then call `endHeader(of:)`.
    @discardableResult @inline(__always)
    mutating func startElement(_ name: UInt32) -> Int {
        currentText = nil
        let index = nodes.count
        open.append(index)
        nodes.append(XMLTree.Node(kind: .element, name: name, start: 0, end: 0))
        return index
    }

    /// Adds an attribute of the element just started.
    mutating func attribute(_ name: UInt32, value: Span<UInt8>) {
        unsafe value.withUnsafeBufferPointer { value in
            unsafe attribute(name, bytes: UnsafeRawPointer(value.baseAddress!), count: value.count)
        }
    }

    /// Adds an attribute of the element just started, its value `count` bytes at `bytes`.
    @inline(__always)
    mutating func attribute(_ name: UInt32, bytes: UnsafeRawPointer, count: Int) {
        let start = Int32(text.count)
        unsafe text.append(bytes: bytes, count: count)
        nodes.append(XMLTree.Node(kind: .attribute, name: name, start: start, end: Int32(text.count)))
    }

    /// Adds a namespace declaration of the element just started (`name`: a name whose prefix and
    /// namespace are the declared prefix and URI).
    mutating func namespaceDeclaration(_ name: UInt32) {
        nodes.append(XMLTree.Node(kind: .namespace, name: name, start: 0, end: 0))
    }

    /// Marks the end of the attributes and declarations of the element just started (at node
    /// index `element`).
    mutating func endHeader(of element: Int) {
        nodes[element].start = Int32(nodes.count)
    }

    /// Adds character data to the innermost open element (merged with a text run just before).
    mutating func characters(_ bytes: Span<UInt8>) {
        unsafe bytes.withUnsafeBufferPointer { bytes in
            unsafe characters(UnsafeRawPointer(bytes.baseAddress!), count: bytes.count)
        }
    }

    /// Adds the `count` bytes at `bytes` as character data (see `characters(_:)`).
    @inline(__always)
    mutating func characters(_ bytes: UnsafeRawPointer, count: Int) {
        unsafe text.append(bytes: bytes, count: count)
        if let currentText {
            nodes[currentText].end = Int32(text.count)
            return
        }
        let start = Int32(text.count - count)
        currentText = nodes.count
        nodes.append(XMLTree.Node(kind: .text, name: 0, start: start, end: Int32(text.count)))
    }

    @inline(__always)
    mutating func endElement() {
        currentText = nil
        let element = open.removeLast()
        nodes[element].end = Int32(nodes.count)
    }

    /// The finished tree (root at node 0), copied out into one exactly sized storage (which
    /// takes over the name references); the builder is emptied and keeps its capacity.
    mutating func finish() -> XElement {
        precondition(open.isEmpty && !nodes.isEmpty, "no finished element")
        let storage = unsafe nodes.withUnsafeBufferPointer { nodes in
            unsafe names.withUnsafeBufferPointer { names in
                unsafe text.withUnsafeBufferPointer { text in
                    unsafe XMLTreeStorage.make(nodes: nodes, names: names, text: text)
                }
            }
        }
        nodes.removeAll()
        text.removeAll()
        unsafe names.removeAll()  // Now owned by the storage.
        return XElement(tree: XMLTree(storage: storage), index: 0)
    }

    /// The finished tree (root at node 0), its names in `table` (the stream parser's shared
    /// names, of which it may index those there now; the builder's own table must be empty),
    /// copied out into one exactly sized storage; the builder is emptied and keeps its capacity.
    mutating func finish(sharing table: XMLNameTable) -> XElement {
        precondition(open.isEmpty && !nodes.isEmpty, "no finished element")
        unsafe precondition(names.isEmpty, "a tree with names of its own and shared names")
        let storage = unsafe nodes.withUnsafeBufferPointer { nodes in
            unsafe text.withUnsafeBufferPointer { text in
                unsafe XMLTreeStorage.make(nodes: nodes, sharing: table, nameCount: table.count, text: text)
            }
        }
        nodes.removeAll()
        text.removeAll()
        return XElement(tree: XMLTree(storage: storage), index: 0)
    }

    /// Discards a partly built tree.
    mutating func reset() {
        currentText = nil
        nodes.removeAll()
        text.removeAll()
        releaseNames()
        open.removeAll()
    }

    mutating func append(
        _ name: XMLName,
        attributes: [XMLAttribute],
        namespaceDeclarations: [XMLNamespaceDeclaration],
        children: [XNode],
        boxes: XMLSpareBuilder? = nil
    ) {
        func add(_ name: XMLName) -> UInt32 {
            addName(boxes?.box(for: name) ?? XMLNameBox(name))
        }
        let element = startElement(add(name))
        for declaration in namespaceDeclarations {
            namespaceDeclaration(add(XMLName("", namespace: declaration.uri, prefix: declaration.prefix)))
        }
        for attribute in attributes {
            let name = add(attribute.name)
            attribute.value.withUTF8Span { self.attribute(name, value: $0) }
        }
        endHeader(of: element)
        for child in children {
            switch child {
            case .element(let element): copy(element)
            case .text(let string): string.withUTF8Span { characters($0) }
            }
        }
        endElement()
    }

    mutating func copy(_ element: XElement) {
        let tree = element.tree
        let started = startElement(addName(tree.nameBox(element.node.name)))
        for position in element.headerRange {
            let header = tree.node(position)
            if header.kind == .namespace {
                namespaceDeclaration(addName(tree.nameBox(header.name)))
            } else {
                let name = addName(tree.nameBox(header.name))
                tree.withBytes(of: header) { attribute(name, value: $0) }
            }
        }
        endHeader(of: started)
        element.forEachChildIndex { position in
            let child = tree.node(position)
            if child.kind == .element {
                copy(XElement(tree: tree, index: position))
            } else {
                tree.withBytes(of: child) { characters($0) }
            }
        }
        endElement()
    }
}
