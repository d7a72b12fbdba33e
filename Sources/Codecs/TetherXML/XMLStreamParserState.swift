import CExpat
import TetherCore

/// The mutable state Expat's callbacks work on (reached through Expat's user data pointer).
@safe struct XMLStreamParserState: ~Copyable {
    let configuration: XMLStreamParser.Configuration
    /// The Expat parser the callbacks run for (the parser struct owns and frees it).
    let parser: XML_Parser
    var builder = XMLTreeBuilder()
    var names: XMLNameCache
    /// The namespace bindings in scope.
    var bindings = XMLNamespaceBindings()
    /// Whether a non-ASCII character may start a name, as Expat judged it (`startsLikeName`),
    /// by the character's UTF-8 bytes: a name whose local part starts with one costs Expat's
    /// judgement once per character, not once per name. Bounded: emptied when full.
    var nameStartVerdicts: [UInt32: Bool] = [:]
    /// Namespace declarations of the element about to start (name-table indices).
    var declarations = PlainBuffer<UInt32>(capacity: 8)
    /// Namespace declarations of the stream header.
    var headerDeclarations: [XMLNamespaceDeclaration] = []
    /// The open stream's root name and declarations (to replay after releasing the buffers).
    var openHeader: (name: XMLName, declarations: [XMLNamespaceDeclaration])?
    /// Scratch space for the cache key of a namespace declaration.
    var declarationKey = PlainBuffer<UInt8>(capacity: 64)

    /// Open elements, the stream root included.
    var depth = 0
    /// Elements in the current top-level element.
    var elementCount = 0
    /// Events parsed and not yet taken by `next()`, each with the stream offset just after its
    /// bytes. A read holding many stanzas is parsed in one Expat call; Expat is suspended only
    /// when `maximumEventsAhead` wait (which bounds the trees a read can make at once).
    var queued: [(event: XMLStreamEvent, end: Int)] = []
    /// How many of `queued` `next()` has taken.
    var taken = 0
    /// The stream offset just after the last event `next()` returned: where `restart()` cuts.
    var delivered = 0
    /// The stream's closing tag was read: nothing after it is parsed, and no more bytes are
    /// taken (the peer ends the connection next).
    var ended = false
    var failure: XMLStreamError?
    /// Expat is suspended (too many events waiting, or the stream's end).
    var suspended = false

    /// Bytes received but not yet fed to Expat.
    var pending: [UInt8] = []
    /// The bytes of the last `XML_Parse` call (kept to find what follows an event).
    var chunk: [UInt8] = []
    /// The stream offset of `chunk`'s first byte.
    var chunkStart = 0
    /// Bytes fed to Expat since the stream (re)started.
    var totalFed = 0
    /// The stream offset just after the last event (or ignored text between elements).
    var lastBoundary = 0
    /// The stream offset where the current top-level element starts.
    var elementStart = 0

    init(configuration: XMLStreamParser.Configuration, parser: XML_Parser) {
        self.configuration = configuration
        unsafe self.parser = parser
        names = XMLNameCache(capacity: configuration.nameCacheCapacity)
        bindImplicitXML()
    }

    /// Binds `xml` to its namespace, as it is without a declaration (below the root's level, so
    /// that it stays bound for the stream's life).
    private mutating func bindImplicitXML() {
        let prefix: StaticString = "xml"
        let scope = unsafe declarationIndex(
            prefix: UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount),
            uri: UnsafeRawBufferPointer(start: Self.xmlNamespace.utf8Start, count: Self.xmlNamespace.utf8CodeUnitCount)
        )
        unsafe bindings.bind(prefix: prefix.utf8Start, count: prefix.utf8CodeUnitCount, scope: scope, level: -1)
    }

    var hasPendingBytes: Bool {
        !ended && (!pending.isEmpty || suspended || totalFed > lastBoundary)
    }

    /// Whether there are bytes to feed Expat: the stream's first two bytes go in together, so
    /// that `takePending` judges its opening the same however the reads were cut.
    var canFeed: Bool {
        !ended && (totalFed > 0 ? !pending.isEmpty : pending.count >= 2)
    }

    /// Inside the stream, between top-level elements, with nothing buffered or waiting.
    var isIdle: Bool {
        failure == nil && taken == queued.count && depth == 1 && !hasPendingBytes
    }

    /// The open stream's header as bytes that recreate its root element and namespace scope.
    func replayableHeader() -> [UInt8]? {
        guard let (name, declarations) = openHeader else { return nil }
        var bytes = Array("<".utf8)
        if let prefix = name.prefix, !prefix.isEmpty { bytes += prefix.utf8 + [UInt8(ascii: ":")] }
        bytes += name.local.utf8
        for declaration in declarations {
            bytes += " xmlns".utf8
            if let prefix = declaration.prefix { bytes += [UInt8(ascii: ":")] + prefix.utf8 }
            bytes += "='".utf8
            XMLSerializer.appendAttributeValue(declaration.uri, &bytes)
            bytes.append(UInt8(ascii: "'"))
        }
        bytes.append(UInt8(ascii: ">"))
        return bytes
    }

    mutating func reset() {
        builder.reset()
        bindings.removeAll()
        bindImplicitXML()
        declarations.removeAll()
        headerDeclarations.removeAll(keepingCapacity: true)
        openHeader = nil
        depth = 0
        elementCount = 0
        queued.removeAll(keepingCapacity: true)
        taken = 0
        delivered = 0
        ended = false
        failure = nil
        suspended = false
        pending.removeAll(keepingCapacity: true)
        chunk.removeAll(keepingCapacity: true)
        chunkStart = 0
        totalFed = 0
        lastBoundary = 0
        elementStart = 0
    }

    /// Moves the pending bytes to `chunk` for feeding; false (and a failure) if the stream does
    /// not start as UTF-8.
    mutating func takePending() -> Bool {
        swap(&chunk, &pending)
        pending.removeAll(keepingCapacity: true)
        chunkStart = totalFed
        // A UTF-8 stream starts with '<' or whitespace. A first byte 0xEF, 0xFE or 0xFF starts a
        // byte-order mark; a zero byte in either of the first two makes Expat take the stream for
        // UTF-16 whatever encoding it was told. Both are refused (`canFeed` holds the first byte
        // back until the second arrives, so this sees both at once).
        if totalFed == 0, chunk.count >= 2,
            chunk[0] == 0xEF || chunk[0] == 0xFE || chunk[0] == 0xFF || chunk[0] == 0 || chunk[1] == 0
        {
            fail(.init(.unsupportedEncoding, "the stream does not start as UTF-8 text (byte-order mark or UTF-16?)"))
            return false
        }
        totalFed += chunk.count
        return true
    }

    /// Takes note of what an `XML_Parse`/`XML_ResumeParser` call returned.
    mutating func parsed(_ status: XML_Status) {
        switch status {
        case XML_STATUS_SUSPENDED:
            suspended = true
        case XML_STATUS_OK:
            // (`chunk` is kept until the next feed: a restart after one of its events takes the
            // bytes that followed from it.)
            suspended = false
        default:
            suspended = false
            fail(XMLStreamParser.error(for: unsafe XML_GetErrorCode(parser)))
        }
        // Bound what the parser holds: the current element (or the bytes since the last
        // element, such as an unfinished start tag) must stay within the size limit. Only once
        // Expat has consumed the whole chunk: when it is suspended, the bytes after the last event
        // are not parsed yet (a read holding many small elements is not one large one).
        if failure == nil, !suspended, totalFed - lastBoundary > configuration.maximumElementSize {
            tooLarge()
        }
    }

    /// The bytes received after the last event `next()` returned (what Expat parsed beyond it
    /// was parsed ahead in the old stream's context, and is given back to be parsed again).
    func unconsumedBytes() -> [UInt8] {
        var remainder: [UInt8] = []
        let offset = max(0, delivered - chunkStart)
        if offset < chunk.count { remainder.append(contentsOf: chunk[offset...]) }
        remainder.append(contentsOf: pending)
        return remainder
    }

    /// Whether the current top-level element has grown past the size limit.
    func elementTooLarge() -> Bool {
        currentEnd() - elementStart > configuration.maximumElementSize
    }

    /// Fails the stream. The received bytes stay (nothing more is taken): the failure may lie
    /// in bytes parsed ahead of a restart, which gives them back to the next stream.
    mutating func fail(_ error: XMLStreamError) {
        if failure == nil { failure = error }
        builder.reset()
    }

    /// Fails the stream and aborts parsing.
    mutating func abort(_ error: XMLStreamError) {
        fail(error)
        _ = unsafe XML_StopParser(parser, 0)
    }

    mutating func tooLarge() {
        abort(.init(.policyViolation, "element larger than \(configuration.maximumElementSize) bytes"))
    }

    mutating func tooManyAttributes() {
        let limit = configuration.maximumAttributes
        abort(.init(.policyViolation, "more than \(limit) attributes (namespace declarations included)"))
    }

    /// The next queued event (noting where it ends, for `restart()`), if any.
    @inline(__always)
    mutating func takeEvent() -> XMLStreamEvent? {
        guard taken < queued.count else { return nil }
        // Moved out (a trivial case left in its place), not copied: a copy of the tuple goes
        // through its type's run-time value witness and retains the tree's references.
        var event = XMLStreamEvent.streamClose
        swap(&event, &queued[taken].event)
        delivered = queued[taken].end
        taken += 1
        if taken == queued.count {
            queued.removeAll(keepingCapacity: true)
            taken = 0
        }
        return event
    }

    /// Queues an event, noting where its bytes end; suspends Expat when `maximumEventsAhead`
    /// wait (resumed once `next()` has taken them).
    mutating func enqueue(_ event: XMLStreamEvent) {
        lastBoundary = currentEnd()
        queued.append((event, lastBoundary))
        if queued.count - taken >= max(1, configuration.maximumEventsAhead) {
            _ = unsafe XML_StopParser(parser, 1)
        }
    }

    /// Stops parsing after the stream's end (Expat stays suspended, never resumed).
    mutating func stopAtStreamEnd() {
        _ = unsafe XML_StopParser(parser, 1)
    }

    /// The stream offset just after the current event.
    func currentEnd() -> Int {
        Int(unsafe XML_GetCurrentByteIndex(parser)) + Int(unsafe XML_GetCurrentByteCount(parser))
    }

    // MARK: Callbacks

    mutating func startElement(
        _ rawName: UnsafePointer<CChar>,
        _ rawAttributes: UnsafeMutablePointer<UnsafePointer<CChar>?>?
    ) {
        guard failure == nil else { return }
        let limits = configuration
        let level = depth
        if level >= 1 {
            if level == 1 {
                elementCount = 0
                elementStart = Int(unsafe XML_GetCurrentByteIndex(parser))
                // Every name of the tree goes into the table it is finished with.
                if let old = names.startTree() { rescopeBindings(from: old) }
            }
            elementCount += 1
            guard level <= limits.maximumDepth else {
                return abort(.init(.policyViolation, "elements nested deeper than \(limits.maximumDepth)"))
            }
            guard elementCount <= limits.maximumElements else {
                return abort(.init(.policyViolation, "more than \(limits.maximumElements) elements in one element"))
            }
        }
        // The declarations first: they apply to the element's own name and attributes. Most
        // elements have none, which a look at each attribute name's first bytes tells.
        if let rawAttributes = unsafe rawAttributes {
            var index = 0
            while let attributeName = unsafe rawAttributes[index] {
                if unsafe Self.isDeclaration(attributeName) {
                    // (Checks the number of attributes too.)
                    guard unsafe declareNamespaces(rawAttributes, level: level) else { return }
                    break
                }
                index &+= 2
            }
            guard index / 2 <= limits.maximumAttributes else { return tooManyAttributes() }
        }
        if level == 0 { return unsafe startStream(rawName, rawAttributes) }
        var prefixed = 0
        guard let name = unsafe qualifiedName(rawName, isAttribute: false, prefixed: &prefixed) else { return }
        let elementPrefixed = prefixed
        let element = builder.startElement(name)
        if !declarations.isEmpty {
            for index in 0..<declarations.count { builder.namespaceDeclaration(declarations[index]) }
            declarations.removeAll()
        }
        if let rawAttributes = unsafe rawAttributes {
            var index = 0
            while let attributeName = unsafe rawAttributes[index], let value = unsafe rawAttributes[index + 1] {
                index &+= 2
                if unsafe Self.isDeclaration(attributeName) { continue }
                guard let name = unsafe qualifiedName(attributeName, isAttribute: true, prefixed: &prefixed) else {
                    return
                }
                unsafe builder.attribute(name, bytes: UnsafeRawPointer(value), count: strlen(value))
            }
            // Attribute values count like text (see `characters`): bounded while arriving.
            guard builder.text.count <= limits.maximumElementSize else { return tooLarge() }
            if prefixed - elementPrefixed > 1 {
                guard unsafe distinctExpandedNames(rawAttributes) else { return }
            }
        }
        builder.endHeader(of: element)
        depth += 1
    }

    /// The stream header (the root element's start tag), its namespaces already bound.
    private mutating func startStream(
        _ rawName: UnsafePointer<CChar>,
        _ rawAttributes: UnsafeMutablePointer<UnsafePointer<CChar>?>?
    ) {
        var prefixed = 0
        guard let nameIndex = unsafe qualifiedName(rawName, isAttribute: false, prefixed: &prefixed) else { return }
        let elementPrefixed = prefixed
        let name = names.table.box(Int(nameIndex)).name
        var attributes: [XMLAttribute] = []
        if let rawAttributes = unsafe rawAttributes {
            var index = 0
            while let attributeName = unsafe rawAttributes[index], let value = unsafe rawAttributes[index + 1] {
                index += 2
                if unsafe Self.isDeclaration(attributeName) { continue }
                guard let attribute = unsafe qualifiedName(attributeName, isAttribute: true, prefixed: &prefixed)
                else { return }
                unsafe attributes.append(XMLAttribute(names.table.box(Int(attribute)).name, String(cString: value)))
            }
            if prefixed - elementPrefixed > 1 {
                guard unsafe distinctExpandedNames(rawAttributes) else { return }
            }
        }
        enqueue(
            .streamOpen(XMLStreamHeader(name: name, attributes: attributes, namespaceDeclarations: headerDeclarations))
        )
        openHeader = (name, headerDeclarations)
        headerDeclarations.removeAll(keepingCapacity: true)
        depth = 1
    }

    mutating func endElement() {
        guard failure == nil else { return }
        depth -= 1
        bindings.unbind(level: depth)
        if depth == 0 {
            ended = true
            enqueue(.streamClose)
            stopAtStreamEnd()
            return
        }
        builder.endElement()
        if depth == 1 {
            guard !elementTooLarge() else { return tooLarge() }
            enqueue(.element(builder.finish(sharing: names.table)))
        }
    }

    mutating func characters(_ text: UnsafePointer<CChar>, _ length: Int) {
        guard failure == nil else { return }
        if depth >= 2 {
            // Text and attribute values are never longer than the raw bytes they came from, so
            // this bounds memory while the element arrives, without asking Expat for positions;
            // the element's exact raw size is checked when it ends and after every parse call.
            guard builder.text.count + length <= configuration.maximumElementSize else { return tooLarge() }
            unsafe builder.characters(UnsafeRawPointer(text), count: length)
        } else {
            // Text directly inside the stream element (whitespace keep-alives) is ignored.
            lastBoundary = currentEnd()
        }
    }

    // MARK: Namespaces

    /// Whether an attribute name is a namespace declaration (`xmlns` or `xmlns:…`).
    @inline(__always)
    static func isDeclaration(_ name: UnsafePointer<CChar>) -> Bool {
        // Byte by byte: the name is NUL-terminated, and the comparisons stop at the first byte
        // that differs, the terminator at the latest.
        let raw = unsafe UnsafeRawPointer(name)
        guard unsafe raw.load(as: UInt8.self) == UInt8(ascii: "x") else { return false }
        guard unsafe raw.load(fromByteOffset: 1, as: UInt8.self) == UInt8(ascii: "m"),
            unsafe raw.load(fromByteOffset: 2, as: UInt8.self) == UInt8(ascii: "l"),
            unsafe raw.load(fromByteOffset: 3, as: UInt8.self) == UInt8(ascii: "n"),
            unsafe raw.load(fromByteOffset: 4, as: UInt8.self) == UInt8(ascii: "s")
        else { return false }
        let next = unsafe raw.load(fromByteOffset: 5, as: UInt8.self)
        return next == 0 || next == UInt8(ascii: ":")
    }

    /// Binds the namespace declarations among an element's attributes (checking the limit on
    /// attributes, declarations included); false after a failure.
    private mutating func declareNamespaces(
        _ rawAttributes: UnsafeMutablePointer<UnsafePointer<CChar>?>,
        level: Int
    ) -> Bool {
        var index = 0
        while let attributeName = unsafe rawAttributes[index], let value = unsafe rawAttributes[index + 1] {
            guard index / 2 < configuration.maximumAttributes else {
                tooManyAttributes()
                return false
            }
            index += 2
            guard unsafe Self.isDeclaration(attributeName) else { continue }
            let nameCount = unsafe strlen(attributeName)
            let prefix = unsafe UnsafeRawBufferPointer(
                start: UnsafeRawPointer(attributeName) + min(6, nameCount),
                count: max(0, nameCount - 6)
            )
            if nameCount > 5 {
                // `xmlns:prefix`: the prefix must be an NCName.
                guard unsafe validQualifiedName(UnsafeRawPointer(attributeName), count: nameCount, colon: 5) else {
                    return false
                }
            }
            let uri = unsafe UnsafeRawBufferPointer(start: UnsafeRawPointer(value), count: strlen(value))
            if let problem = unsafe Self.reservedBindingProblem(prefix: prefix, uri: uri) {
                abort(.init(.notWellFormed, problem))
                return false
            }
            let declaration = unsafe declarationIndex(prefix: prefix, uri: uri)
            if level == 0 {
                unsafe headerDeclarations.append(
                    XMLNamespaceDeclaration(
                        prefix: nameCount > 5 ? String(decoding: prefix, as: UTF8.self) : nil,
                        uri: String(decoding: uri, as: UTF8.self)
                    )
                )
            } else {
                declarations.append(declaration)
            }
            let scope = unsafe uri.isEmpty ? XMLNameCache.noScope : declaration
            unsafe bindings.bind(prefix: prefix.baseAddress!, count: prefix.count, scope: scope, level: level)
        }
        return true
    }

    /// Why binding `prefix` (empty: the default namespace) to `uri` breaks Namespaces in XML 1.0
    /// (§3: a prefix cannot be undeclared; `xml` belongs to its namespace and that namespace to
    /// it; `xmlns` and its namespace are bound to nothing), or nil.
    static func reservedBindingProblem(prefix: UnsafeRawBufferPointer, uri: UnsafeRawBufferPointer) -> String? {
        if unsafe !prefix.isEmpty && uri.isEmpty { return "a prefix undeclared (xmlns:prefix='')" }
        let isXMLPrefix = unsafe Self.equals(prefix, "xml")
        let isXMLNamespace = unsafe Self.equals(uri, Self.xmlNamespace)
        if isXMLPrefix != isXMLNamespace {
            return isXMLPrefix
                ? "the prefix xml bound to another namespace" : "the XML namespace bound to a prefix other than xml"
        }
        if unsafe Self.equals(prefix, "xmlns") { return "the prefix xmlns declared" }
        if unsafe Self.equals(uri, Self.xmlnsNamespace) { return "the xmlns namespace bound to a prefix" }
        return nil
    }

    /// Whether `bytes` are the UTF-8 of `text` (the length compared first: most differ in it).
    @inline(__always)
    static func equals(_ bytes: UnsafeRawBufferPointer, _ text: StaticString) -> Bool {
        unsafe bytes.count == text.utf8CodeUnitCount
            && memcmp(bytes.baseAddress!, text.utf8Start, bytes.count) == 0
    }

    /// The namespace of `xmlns` declarations, which nothing may be bound to.
    static let xmlnsNamespace: StaticString = "http://www.w3.org/2000/xmlns/"
    /// The namespace `xml` is bound to (`XMLName.xmlNamespace`).
    static let xmlNamespace: StaticString = "http://www.w3.org/XML/1998/namespace"

    /// The table index of the declaration binding `prefix` (empty: the default namespace) to
    /// `uri`: its key is 0x1E (never in a name, so no name collides), the prefix, 0x1F, the URI.
    private mutating func declarationIndex(prefix: UnsafeRawBufferPointer, uri: UnsafeRawBufferPointer) -> UInt32 {
        declarationKey.removeAll()
        declarationKey.append(0x1E)
        if unsafe !prefix.isEmpty { unsafe declarationKey.append(bytes: prefix.baseAddress!, count: prefix.count) }
        declarationKey.append(0x1F)
        if unsafe !uri.isEmpty { unsafe declarationKey.append(bytes: uri.baseAddress!, count: uri.count) }
        return unsafe declarationKey.withUnsafeBufferPointer { key in
            unsafe names.index(
                of: key.baseAddress!,
                count: key.count,
                scope: XMLNameCache.noScope,
                make: { bytes, _ in unsafe Self.declarationName(bytes) }
            )
        }
    }

    /// After the name table was replaced at a tree's start: the bindings in scope (the stream
    /// header's) get their declarations' indices in the new table.
    private mutating func rescopeBindings(from old: XMLNameTable) {
        for index in 0..<bindings.count {
            let scope = bindings[index].scope
            guard scope != XMLNameCache.noScope else { continue }
            let declaration = old.box(Int(scope)).name
            let prefix = Array((declaration.prefix ?? "").utf8)
            let uri = Array((declaration.namespace ?? "").utf8)
            let newScope = unsafe prefix.withUnsafeBytes { prefix in
                unsafe uri.withUnsafeBytes { uri in unsafe declarationIndex(prefix: prefix, uri: uri) }
            }
            bindings[index].scope = newScope
        }
    }

    /// The table index of the name of an element or attribute, resolved in the bindings in
    /// scope; nil (and a failure) if it is not a valid qualified name or its prefix is unbound.
    /// Counts the names with a prefix in `prefixed`.
    ///
    /// A name is first looked up as if it had no prefix (in the default namespace's scope for an
    /// element, in none for an attribute): a prefixed name is never cached in either scope (a
    /// prefix's declaration is never the default namespace's), so a hit is exact and the common
    /// case costs no search for a colon.
    @inline(__always)
    private mutating func qualifiedName(
        _ rawName: UnsafePointer<CChar>,
        isAttribute: Bool,
        prefixed: inout Int
    ) -> UInt32? {
        let raw = unsafe UnsafeRawPointer(rawName)
        let count = unsafe strlen(rawName)
        let unprefixedScope = isAttribute ? XMLNameCache.noScope : bindings.defaultScope
        if let index = unsafe names.cachedIndex(of: raw, count: count, scope: unprefixedScope) { return index }
        return unsafe uncachedName(
            raw,
            count: count,
            isAttribute: isAttribute,
            unprefixedScope: unprefixedScope,
            prefixed: &prefixed
        )
    }

    /// `qualifiedName` for a name not cached in the unprefixed scope.
    private mutating func uncachedName(
        _ raw: UnsafeRawPointer,
        count: Int,
        isAttribute: Bool,
        unprefixedScope: UInt32,
        prefixed: inout Int
    ) -> UInt32? {
        let colon = unsafe Self.colon(in: raw, count: count)
        let scope: UInt32
        if colon < 0 {
            scope = unprefixedScope
        } else {
            prefixed += 1
            guard unsafe validQualifiedName(raw, count: count, colon: colon) else { return nil }
            guard let bound = unsafe bindings.scope(ofPrefix: raw, count: colon) else {
                abort(
                    .init(
                        .notWellFormed,
                        isAttribute ? "an attribute's prefix is unbound" : "an element's prefix is unbound"
                    )
                )
                return nil
            }
            scope = bound
        }
        return unsafe names.index(of: raw, count: count, scope: scope) { bytes, table in
            unsafe Self.name(bytes, scope: scope, table: table)
        }
    }

    /// Whether a name with a colon at `colon` is a qualified name (Namespaces in XML 1.0 §4): one
    /// colon, with a prefix before it and a local part after it that starts as names start (Expat
    /// checked the rest of the name). Otherwise fails the stream.
    private mutating func validQualifiedName(_ raw: UnsafeRawPointer, count: Int, colon: Int) -> Bool {
        var valid = colon > 0 && colon < count - 1
        if valid {
            let local = unsafe UnsafeRawBufferPointer(start: raw + colon + 1, count: count - colon - 1)
            if unsafe local.contains(UInt8(ascii: ":")) {
                valid = false
            } else {
                let first = unsafe local[0]
                switch first {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "_"):
                    valid = true
                case 0x80...:
                    // Let Expat judge with its own character tables, as it judged the rest.
                    valid = unsafe nameStarts(local)
                default:
                    valid = false
                }
            }
        }
        if !valid { abort(.init(.notWellFormed, "a name that is not a qualified name (prefix:local)")) }
        return valid
    }

    /// The most characters `nameStartVerdicts` keeps.
    static let maximumNameStartVerdicts = 256

    /// Whether the first character of `local` (a run of name characters that starts with a
    /// non-ASCII one) may start a name: Expat's verdict, remembered per character.
    private mutating func nameStarts(_ local: UnsafeRawBufferPointer) -> Bool {
        let lead = unsafe local[0]
        let length = min(local.count, lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2)
        var key: UInt32 = 0
        for index in 0..<length { key = key << 8 | UInt32(unsafe local[index]) }
        if let verdict = nameStartVerdicts[key] { return verdict }
        let verdict = unsafe Self.startsLikeName(UnsafeRawBufferPointer(rebasing: local[0..<length]))
        if nameStartVerdicts.count >= Self.maximumNameStartVerdicts {
            nameStartVerdicts.removeAll(keepingCapacity: true)
        }
        nameStartVerdicts[key] = verdict
        return verdict
    }

    /// Whether Expat takes `local` (name characters) as an element name; given a name's first
    /// character, whether that character may start a name. Only for a local part starting with
    /// a non-ASCII character, which is rare.
    static func startsLikeName(_ local: UnsafeRawBufferPointer) -> Bool {
        guard let checker = unsafe XML_ParserCreate("UTF-8") else { return false }
        defer { unsafe XML_ParserFree(checker) }
        var document = Array("<".utf8)
        unsafe document.append(contentsOf: local)
        document.append(contentsOf: "/>".utf8)
        return unsafe document.withUnsafeBufferPointer { buffer in
            unsafe XML_Parse(
                checker,
                UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self),
                Int32(buffer.count),
                1
            )
        } == XML_STATUS_OK
    }

    /// Whether no two of an element's prefixed attributes have the same local name and namespace
    /// (Namespaces in XML 1.0 §6.3; equal qualified names Expat already refused). Otherwise fails.
    private mutating func distinctExpandedNames(_ rawAttributes: UnsafeMutablePointer<UnsafePointer<CChar>?>) -> Bool {
        var seen: [XMLName] = []
        var index = 0
        while let attributeName = unsafe rawAttributes[index] {
            index += 2
            var prefixed = 0
            guard unsafe !Self.isDeclaration(attributeName),
                let name = unsafe qualifiedName(attributeName, isAttribute: true, prefixed: &prefixed),
                prefixed == 1
            else { continue }
            let expanded = names.table.box(Int(name)).name
            if seen.contains(expanded) {
                abort(.init(.notWellFormed, "two attributes with the same local name and namespace"))
                return false
            }
            seen.append(expanded)
        }
        return true
    }

    /// The offset of the first colon in the `count` bytes at `raw`, or -1: names of up to 16
    /// bytes (most) in two overlapping word loads.
    @inline(__always)
    static func colon(in raw: UnsafeRawPointer, count: Int) -> Int {
        if count >= 8 {
            var offset = 0
            while true {
                if let found = unsafe colon(inWordAt: raw + offset) { return offset &+ found }
                if offset &+ 16 > count { break }
                offset &+= 8
            }
            let last = count &- 8
            guard let found = unsafe colon(inWordAt: raw + last) else { return -1 }
            return last &+ found
        }
        if count >= 4 {
            let head = unsafe raw.loadUnaligned(as: UInt32.self)
            let tail = unsafe raw.loadUnaligned(fromByteOffset: count &- 4, as: UInt32.self)
            let word = (UInt64(tail) << 32 | UInt64(head)) ^ 0x3A3A_3A3A_3A3A_3A3A
            let zero = (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080
            guard zero != 0 else { return -1 }
            let byte = zero.trailingZeroBitCount / 8
            return byte < 4 ? byte : count &- 8 &+ byte
        }
        for offset in 0..<count where unsafe raw.load(fromByteOffset: offset, as: UInt8.self) == UInt8(ascii: ":") {
            return offset
        }
        return -1
    }

    /// The index of the first colon among the eight bytes at `raw`, if any.
    @inline(__always)
    private static func colon(inWordAt raw: UnsafeRawPointer) -> Int? {
        let word = unsafe raw.loadUnaligned(as: UInt64.self) ^ 0x3A3A_3A3A_3A3A_3A3A
        let zero = (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080
        return zero == 0 ? nil : zero.trailingZeroBitCount / 8
    }

    /// The name for a qualified name (`prefix:local` or `local`, valid UTF-8) resolved to the
    /// declaration at `scope` in `table` (or to no namespace).
    static func name(_ bytes: UnsafeRawBufferPointer, scope: UInt32, table: XMLNameTable) -> XMLName {
        let namespace = scope == XMLNameCache.noScope ? nil : table.box(Int(scope)).name.namespace
        guard let colon = unsafe bytes.firstIndex(of: UInt8(ascii: ":")) else {
            return unsafe XMLName(String(decoding: bytes, as: UTF8.self), namespace: namespace)
        }
        return unsafe XMLName(
            String(decoding: bytes[(colon + 1)...], as: UTF8.self),
            namespace: namespace,
            prefix: String(decoding: bytes[..<colon], as: UTF8.self)
        )
    }

    /// The name for a declaration key `0x1E prefix 0x1F uri`: prefix and URI.
    static func declarationName(_ bytes: UnsafeRawBufferPointer) -> XMLName {
        let separator = unsafe bytes.firstIndex(of: 0x1F)!
        let prefix = unsafe String(decoding: bytes[1..<separator], as: UTF8.self)
        let uri = unsafe String(decoding: bytes[(separator + 1)...], as: UTF8.self)
        return XMLName("", namespace: uri, prefix: prefix.isEmpty ? nil : prefix)
    }
}

// MARK: - Expat callbacks (C function pointers; the state arrives as user data)

func parserState(_ userData: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<XMLStreamParserState> {
    unsafe userData!.assumingMemoryBound(to: XMLStreamParserState.self)
}

let xmlStartElement: XML_StartElementHandler = { userData, rawName, rawAttributes in
    guard let rawName = unsafe rawName else { return }
    unsafe parserState(userData).pointee.startElement(rawName, rawAttributes)
}

let xmlEndElement: XML_EndElementHandler = { userData, _ in
    unsafe parserState(userData).pointee.endElement()
}

let xmlCharacters: XML_CharacterDataHandler = { userData, text, length in
    guard let text = unsafe text else { return }
    unsafe parserState(userData).pointee.characters(text, Int(length))
}

let xmlDeclaration: XML_XmlDeclHandler = { userData, _, encoding, _ in
    guard let encoding = unsafe encoding.map({ unsafe String(cString: $0) }), encoding.lowercased() != "utf-8" else {
        return
    }
    unsafe parserState(userData).pointee.abort(
        .init(.unsupportedEncoding, "the XML declaration names the encoding \(encoding)")
    )
}

let xmlComment: XML_CommentHandler = { userData, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "comment"))
}

let xmlProcessingInstruction: XML_ProcessingInstructionHandler = { userData, _, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "processing instruction"))
}

let xmlDoctype: XML_StartDoctypeDeclHandler = { userData, _, _, _, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "document type declaration"))
}

let xmlEntityDeclaration: XML_EntityDeclHandler = { userData, _, _, _, _, _, _, _, _ in
    unsafe parserState(userData).pointee.abort(.init(.restrictedXML, "entity declaration"))
}
