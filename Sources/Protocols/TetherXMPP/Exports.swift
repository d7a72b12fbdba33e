// What this module's API hands out comes with it: importing `TetherXMPP` is enough to use it
// (the machine kit, `XElement` and the stream parser, SRV records).
@_exported public import TetherCore
@_exported public import TetherDNS
@_exported public import TetherXML
