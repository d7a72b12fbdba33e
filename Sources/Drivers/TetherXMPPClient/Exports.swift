// What this module's API hands out comes with it: importing `TetherXMPPClient` is enough to use it
// (the XMPP machine's types, the driver's options and calls, `Secret`, `Endpoint`, `XElement`).
@_exported public import TetherDispatch
@_exported public import TetherXMPP
