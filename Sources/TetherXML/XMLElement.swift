import TetherCore

/// A child of an element: a nested element or a run of text.
public enum XMLNode: Hashable, Sendable {
    /// A nested element.
    case element(XMLElement)
    /// Character data (entities and character references resolved, CDATA included).
    case text(String)
}

/// The flat storage of one element tree: every node in document order in one array, every text
/// and attribute value in one byte buffer. A parsed stanza therefore costs two allocations,
/// whatever its size; names are shared (interned) strings.
struct XMLTree: Sendable {
    enum Kind: UInt8, Sendable {
        case element, attribute, namespace, text
    }

    /// One node. An element is followed by its attributes and namespace declarations, then its
    /// children; `start` is the index of its first child node and `end` the index after its
    /// subtree. For attributes and text, `start..<end` is the value's range in `text`. A namespace
    /// declaration keeps its prefix in `name.prefix` and its URI in `name.namespace`.
    struct Node: Sendable {
        var kind: Kind
        var name: XMLName
        var start: Int32
        var end: Int32
    }

    var nodes: [Node]
    var text: [UInt8]

    func string(_ node: Node) -> String {
        String(decoding: text[Int(node.start)..<Int(node.end)], as: UTF8.self)
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
    public var name: XMLName { node.name }

    /// The element's local name.
    public var localName: String { node.name.local }

    /// The element's namespace URI.
    public var namespace: String? { node.name.namespace }

    /// The index range of the attribute and namespace-declaration nodes.
    var headerRange: Range<Int> { (index + 1)..<Int(node.start) }

    /// The attributes, in document order.
    public var attributes: [XMLAttribute] {
        headerRange.compactMap { position in
            let attribute = tree.nodes[position]
            return attribute.kind == .attribute ? XMLAttribute(attribute.name, tree.string(attribute)) : nil
        }
    }

    /// The namespace declarations written on this element.
    public var namespaceDeclarations: [XMLNamespaceDeclaration] {
        headerRange.compactMap { position in
            let declaration = tree.nodes[position]
            guard declaration.kind == .namespace else { return nil }
            return XMLNamespaceDeclaration(prefix: declaration.name.prefix, uri: declaration.name.namespace ?? "")
        }
    }

    /// The value of the attribute `local` in `namespace` (nil: no namespace, as unprefixed
    /// attributes are).
    public func attribute(_ local: String, namespace: String? = nil) -> String? {
        for position in headerRange {
            let attribute = tree.nodes[position]
            if attribute.kind == .attribute, attribute.name.local == local, attribute.name.namespace == namespace {
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
            if child.kind == .element, child.name.local == local, namespace == nil || child.name.namespace == namespace
            {
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
struct XMLTreeBuilder {
    var nodes: [XMLTree.Node] = []
    var text: [UInt8] = []
    /// Indices of the elements still open.
    var open: [Int] = []
    /// The text node that character data continues (Expat delivers text in pieces), if any.
    var currentText: Int?

    var depth: Int { open.count }

    mutating func startElement(_ name: XMLName) {
        currentText = nil
        open.append(nodes.count)
        nodes.append(XMLTree.Node(kind: .element, name: name, start: Int32(nodes.count + 1), end: 0))
    }

    /// Adds an attribute of the element just started.
    mutating func attribute(_ name: XMLName, value: Span<UInt8>) {
        let start = Int32(text.count)
        text.append(copying: value)
        nodes.append(XMLTree.Node(kind: .attribute, name: name, start: start, end: Int32(text.count)))
        nodes[open[open.count - 1]].start = Int32(nodes.count)
    }

    /// Adds a namespace declaration of the element just started.
    mutating func namespaceDeclaration(prefix: String?, uri: String) {
        nodes.append(
            XMLTree.Node(kind: .namespace, name: XMLName("", namespace: uri, prefix: prefix), start: 0, end: 0)
        )
        nodes[open[open.count - 1]].start = Int32(nodes.count)
    }

    /// Adds character data to the innermost open element (merged with a text run just before).
    mutating func characters(_ bytes: Span<UInt8>) {
        if let currentText {
            text.append(copying: bytes)
            nodes[currentText].end = Int32(text.count)
            return
        }
        let start = Int32(text.count)
        text.append(copying: bytes)
        currentText = nodes.count
        nodes.append(XMLTree.Node(kind: .text, name: XMLName(""), start: start, end: Int32(text.count)))
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
        // Copies into new, exactly sized buffers, so the builder keeps its own (unshared) ones.
        var treeNodes: [XMLTree.Node] = []
        treeNodes.reserveCapacity(nodes.count)
        treeNodes.append(contentsOf: nodes)
        var treeText: [UInt8] = []
        treeText.reserveCapacity(text.count)
        treeText.append(contentsOf: text)
        let tree = XMLTree(nodes: treeNodes, text: treeText)
        nodes.removeAll(keepingCapacity: true)
        text.removeAll(keepingCapacity: true)
        return XMLElement(tree: tree, index: 0)
    }

    /// Discards a partly built tree.
    mutating func reset() {
        currentText = nil
        nodes.removeAll(keepingCapacity: true)
        text.removeAll(keepingCapacity: true)
        open.removeAll(keepingCapacity: true)
    }

    mutating func append(
        _ name: XMLName,
        attributes: [XMLAttribute],
        namespaceDeclarations: [XMLNamespaceDeclaration],
        children: [XMLNode]
    ) {
        startElement(name)
        for declaration in namespaceDeclarations {
            namespaceDeclaration(prefix: declaration.prefix, uri: declaration.uri)
        }
        for attribute in attributes {
            self.attribute(attribute.name, value: attribute.value.utf8.span)
        }
        for child in children {
            switch child {
            case .element(let element): copy(element)
            case .text(let string): characters(string.utf8.span)
            }
        }
        endElement()
    }

    mutating func copy(_ element: XMLElement) {
        startElement(element.name)
        for position in element.headerRange {
            let header = element.tree.nodes[position]
            if header.kind == .namespace {
                namespaceDeclaration(prefix: header.name.prefix, uri: header.name.namespace ?? "")
            } else {
                attribute(header.name, value: element.tree.text.span.extracting(Int(header.start)..<Int(header.end)))
            }
        }
        element.forEachChildIndex { position in
            let child = element.tree.nodes[position]
            if child.kind == .element {
                copy(XMLElement(tree: element.tree, index: position))
            } else {
                characters(element.tree.text.span.extracting(Int(child.start)..<Int(child.end)))
            }
        }
        endElement()
    }
}
