// Every workflow the Synctide worker runs is exported from here.
export {};
