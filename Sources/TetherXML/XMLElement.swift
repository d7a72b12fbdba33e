import TetherCore

/// A child of an element: a nested element or a run of text.
public enum XMLNode: Hashable, Sendable {
    /// A nested element.
    case element(XMLElement)
    /// Character data (entities and character references resolved, CDATA included).
    case text(String)
}

/// The flat storage of one element tree: every node in document order in one array, every text
/// and attribute value in one byte buffer, and each distinct name once in a name table that the
/// nodes refer to by index. A parsed stanza therefore costs at most three allocations, whatever
/// its size, and its nodes hold no references (copying or freeing them is a plain memory copy);
/// the names are the stream parser's cached strings, shared between trees.
struct XMLTree: Sendable {
    enum Kind: UInt8, Sendable {
        case element, attribute, namespace, text
    }

    /// One node. An element is followed by its attributes and namespace declarations, then its
    /// children; `start` is the index of its first child node and `end` the index after its
    /// subtree. For attributes and text, `start..<end` is the value's range in `text`. `name` is
    /// an index into `names` (unused for text); a namespace declaration's name keeps its prefix
    /// in `prefix` and its URI in `namespace`.
    struct Node: Sendable {
        var kind: Kind
        var name: UInt32
        var start: Int32
        var end: Int32
    }

    var nodes: [Node]
    var text: [UInt8]
    var names: [XMLNameBox]

    func string(_ node: Node) -> String {
        String(decoding: text[Int(node.start)..<Int(node.end)], as: UTF8.self)
    }

    func name(_ node: Node) -> XMLName {
        names[Int(node.name)].name
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

/// An XML element with its attributes, namespace declarations and children: an immutable value.
///
/// Parsed elements (from `XMLStreamParser`) keep the whole tree in two buffers and hand out views
/// of it: `children`, `attributes` and `text` build Swift values on demand. Equality is the XML
/// Infoset's: names (namespace and local part), attributes in order and children, with adjacent
/// text merged; prefixes and namespace declarations are presentation and do not count.
public struct XMLElement: Hashable, Sendable, CustomStringConvertible {
    let tree: XMLTree
    let index: Int

    init(tree: XMLTree, index: Int) {
        self.tree = tree
        self.index = index
    }

    var node: XMLTree.Node { tree.nodes[index] }

    /// The element's name.
    public var name: XMLName { tree.name(node) }

    /// The element's local name.
    public var localName: String { name.local }

    /// The element's namespace URI.
    public var namespace: String? { name.namespace }

    /// The index range of the attribute and namespace-declaration nodes.
    var headerRange: Range<Int> { (index + 1)..<Int(node.start) }

    /// The attributes, in document order.
    public var attributes: [XMLAttribute] {
        headerRange.compactMap { position in
            let attribute = tree.nodes[position]
            return attribute.kind == .attribute ? XMLAttribute(tree.name(attribute), tree.string(attribute)) : nil
        }
    }

    /// The namespace declarations written on this element.
    public var namespaceDeclarations: [XMLNamespaceDeclaration] {
        headerRange.compactMap { position in
            let declaration = tree.nodes[position]
            guard declaration.kind == .namespace else { return nil }
            let name = tree.name(declaration)
            return XMLNamespaceDeclaration(prefix: name.prefix, uri: name.namespace ?? "")
        }
    }

    /// The value of the attribute `local` in `namespace` (nil: no namespace, as unprefixed
    /// attributes are).
    public func attribute(_ local: String, namespace: String? = nil) -> String? {
        for position in headerRange {
            let attribute = tree.nodes[position]
            guard attribute.kind == .attribute else { continue }
            let box = tree.names[Int(attribute.name)]
            if box.name.local == local, box.name.namespace == namespace {
                return tree.string(attribute)
            }
        }
        return nil
    }

    /// Calls `body` with each child node index, in order, skipping the children's subtrees.
    func forEachChildIndex(_ body: (Int) throws -> Void) rethrows {
        var position = Int(node.start)
        let end = Int(node.end)
        while position < end {
            try body(position)
            let child = tree.nodes[position]
            position = child.kind == .element ? Int(child.end) : position + 1
        }
    }

    /// The children: elements and text runs, in document order.
    public var childNodes: [XMLNode] {
        var result: [XMLNode] = []
        forEachChildIndex { position in
            let child = tree.nodes[position]
            if child.kind == .element {
                result.append(.element(XMLElement(tree: tree, index: position)))
            } else {
                result.append(.text(tree.string(child)))
            }
        }
        return result
    }

    /// The child elements, in document order.
    public var children: [XMLElement] {
        var result: [XMLElement] = []
        forEachChildIndex { position in
            if tree.nodes[position].kind == .element { result.append(XMLElement(tree: tree, index: position)) }
        }
        return result
    }

    /// The first child element named `local` in `namespace` (any namespace when nil).
    public func firstChild(_ local: String, namespace: String? = nil) -> XMLElement? {
        var found: XMLElement?
        forEachChildIndex { position in
            guard found == nil else { return }
            let child = tree.nodes[position]
            guard child.kind == .element else { return }
            let box = tree.names[Int(child.name)]
            if box.name.local == local, namespace == nil || box.name.namespace == namespace {
                found = XMLElement(tree: tree, index: position)
            }
        }
        return found
    }

    /// The child elements named `local` in `namespace` (any namespace when nil).
    public func children(_ local: String, namespace: String? = nil) -> [XMLElement] {
        children.filter { $0.localName == local && (namespace == nil || $0.namespace == namespace) }
    }

    /// The element's direct text (its text children joined).
    public var text: String {
        var bytes: [UInt8] = []
        forEachChildIndex { position in
            let child = tree.nodes[position]
            if child.kind == .text { bytes.append(contentsOf: tree.text[Int(child.start)..<Int(child.end)]) }
        }
        return String(decoding: bytes, as: UTF8.self)
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
        children: [XMLNode] = []
    ) {
        var builder = XMLTreeBuilder()
        builder.append(name, attributes: attributes, namespaceDeclarations: namespaceDeclarations, children: children)
        self = builder.finish()
    }

    /// A copy of this element as the root of its own tree (releasing the rest of a larger tree).
    public func compacted() -> XMLElement {
        var builder = XMLTreeBuilder()
        builder.copy(self)
        return builder.finish()
    }

    // MARK: - Equality

    public static func == (lhs: XMLElement, rhs: XMLElement) -> Bool {
        guard lhs.name == rhs.name, lhs.attributes == rhs.attributes else { return false }
        return lhs.mergedChildren == rhs.mergedChildren
    }

    /// Children with adjacent text runs merged and empty text dropped.
    var mergedChildren: [XMLNode] {
        var result: [XMLNode] = []
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
/// finished stanza out into exactly sized buffers.
///
/// Names go into the tree's name table first (`addName`); elements, attributes and namespace
/// declarations then refer to them by index. After an element's attributes and declarations,
/// `endHeader(of:)` marks where its children start.
struct XMLTreeBuilder: ~Copyable {
    var nodes = PlainBuffer<XMLTree.Node>()
    var text = PlainBuffer<UInt8>(capacity: 1024)
    var names: [XMLNameBox] = []
    /// Indices of the elements still open.
    var open = PlainBuffer<Int>(capacity: 16)
    /// The text node that character data continues (Expat delivers text in pieces), if any.
    var currentText: Int?
    /// Identifies the tree being built (incremented by `finish()` and `reset()`), so that a name
    /// cache can tell whether a name is already in this tree's table.
    private(set) var generation: UInt64 = 1

    var depth: Int { open.count }

    /// Adds a name to the tree's name table and returns its index.
    mutating func addName(_ name: XMLName) -> UInt32 {
        addName(XMLNameBox(name))
    }

    /// Adds a shared name to the tree's name table and returns its index.
    mutating func addName(_ name: XMLNameBox) -> UInt32 {
        names.append(name)
        return UInt32(names.count - 1)
    }

    /// Starts an element named by the name-table entry `name` and returns its node index; add
    /// its attributes and namespace declarations next, then call `endHeader(of:)`.
    @discardableResult
    mutating func startElement(_ name: UInt32) -> Int {
        currentText = nil
        let index = nodes.count
        open.append(index)
        nodes.append(XMLTree.Node(kind: .element, name: name, start: 0, end: 0))
        return index
    }

    /// Adds an attribute of the element just started.
    mutating func attribute(_ name: UInt32, value: Span<UInt8>) {
        let start = Int32(text.count)
        unsafe value.withUnsafeBufferPointer { unsafe text.append(copying: $0) }
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
        unsafe bytes.withUnsafeBufferPointer { unsafe text.append(copying: $0) }
        if let currentText {
            nodes[currentText].end = Int32(text.count)
            return
        }
        let start = Int32(text.count - bytes.count)
        currentText = nodes.count
        nodes.append(XMLTree.Node(kind: .text, name: 0, start: start, end: Int32(text.count)))
    }

    mutating func endElement() {
        currentText = nil
        let element = open.removeLast()
        nodes[element].end = Int32(nodes.count)
    }

    /// The finished tree (root at node 0), copied out into exactly sized buffers; the builder is
    /// emptied and keeps its capacity.
    mutating func finish() -> XMLElement {
        precondition(open.isEmpty && !nodes.isEmpty, "no finished element")
        // Nodes and text are copied into new, exactly sized buffers, so the builder keeps its
        // own (unshared) ones. The name table moves to the tree as it is (copying it would count
        // every reference up and then down again) and the builder starts a new one, with room
        // for the names of a typical stanza.
        let tree = XMLTree(nodes: nodes.array(), text: text.array(), names: names)
        nodes.removeAll()
        text.removeAll()
        names = []
        names.reserveCapacity(Self.typicalNameCount)
        generation += 1
        return XMLElement(tree: tree, index: 0)
    }

    /// The distinct names of a typical stanza (a roster push or result has about ten).
    static let typicalNameCount = 16

    /// Discards a partly built tree.
    mutating func reset() {
        currentText = nil
        nodes.removeAll()
        text.removeAll()
        names.removeAll(keepingCapacity: true)
        open.removeAll()
        generation += 1
    }

    mutating func append(
        _ name: XMLName,
        attributes: [XMLAttribute],
        namespaceDeclarations: [XMLNamespaceDeclaration],
        children: [XMLNode]
    ) {
        let element = startElement(addName(name))
        for declaration in namespaceDeclarations {
            namespaceDeclaration(addName(XMLName("", namespace: declaration.uri, prefix: declaration.prefix)))
        }
        for attribute in attributes {
            self.attribute(addName(attribute.name), value: attribute.value.utf8.span)
        }
        endHeader(of: element)
        for child in children {
            switch child {
            case .element(let element): copy(element)
            case .text(let string): characters(string.utf8.span)
            }
        }
        endElement()
    }

    mutating func copy(_ element: XMLElement) {
        let tree = element.tree
        let started = startElement(addName(tree.names[Int(element.node.name)]))
        for position in element.headerRange {
            let header = tree.nodes[position]
            if header.kind == .namespace {
                namespaceDeclaration(addName(tree.name(header)))
            } else {
                attribute(
                    addName(tree.name(header)),
                    value: tree.text.span.extracting(Int(header.start)..<Int(header.end))
                )
            }
        }
        endHeader(of: started)
        element.forEachChildIndex { position in
            let child = tree.nodes[position]
            if child.kind == .element {
                copy(XMLElement(tree: tree, index: position))
            } else {
                characters(tree.text.span.extracting(Int(child.start)..<Int(child.end)))
            }
        }
        endElement()
    }
}
