/* Runs a Lua script embedded through liblua5.4.so (Debian's liblua5.4-dev): `lua-host SCRIPT
 * [ARGS...]`, with `arg` set as lua5.4 sets it, so that testbed/lua/server.lua runs the same
 * here as under Debian's statically linked lua5.4 (docs/interpreters.md). */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: lua-host SCRIPT [ARGS...]\n");
        return 2;
    }
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_createtable(L, argc, 0);
    for (int i = 1; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - 1);
    }
    lua_setglobal(L, "arg");
    if (luaL_loadfile(L, argv[1]) != LUA_OK || lua_pcall(L, 0, 0, 0) != LUA_OK) {
        fprintf(stderr, "lua-host: %s\n", lua_tostring(L, -1));
        lua_close(L);
        return 1;
    }
    lua_close(L);
    return 0;
}
